"""A fleet plan served: one router per model over shared datacenters, chips and WAN lines.

In: a fleet plan (its pools, routes and assignments name a `model`: `placer optimize` on a
scenario with `models:`), optionally its fleet scenario, and the serving options. Out:

- (`executor.placement.plan_models(plan)`: the models a plan serves, () for a single-model plan.)
- `fleet_members(plan, scenario, ...)` → one `FleetMember` per model: its own plan
  (`placer.fleetplan.split_plan`), its own `ServingConfig` (its pipelines, thresholds, handoff
  and router datacenter; with the scenario, checked against that model's member scenario) and
  its instances (`executor.placement.placement`: `<model>.<role>-…`, each spec naming its model).
  The WAN lines are the fleet's, shared by every model (one emulated line carries both models'
  KV, as the plan sums their use of it).
- `Fleet`: the running deployments (a `LocalCluster` or `RayDeployment` per model, each with its
  own router and its own directory: a model's instances reach only its router and each other)
  and the shared lines; `stats()` by model; the surface `executor.elastic` changes live
  (`specs`, `router` — `FleetRouters`, the routers seen as one —, `start_instance` in the spec's
  model, `stop_instance`, `free_resources`; `apply_plan`): a new plan of the same models changes
  each model's instances, anything else is refused (`executor.elastic.refuse_fleet_change`).
- `local_fleet(...)`: the whole fleet in this process (tests, benches).

Rules: the chips of a datacenter are shared — the pools of all models together must fit its
inventory (InfeasiblePlanError naming it); a scenario given must be the fleet's (InputError
naming `--scenario` otherwise) and list every model the plan names. No torch, no ray here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from executor.config import ServingConfig
from executor.elastic import ApplyReport, apply_specs, refuse_fleet_change
from executor.placement import InstanceSpec, link_shapes, placement, plan_models
from placer.errors import InfeasiblePlanError, InputError
from placer.fleetplan import split_plan
from placer.plancheck import check_inventory  # Σ over every model's pools
from placer.plan import Plan

if TYPE_CHECKING:
    from placer.specs import Scenario


@dataclass(frozen=True)
class FleetMember:
    """One model of a fleet: its plan, how its router serves, its instances."""

    name: str
    plan: Plan
    config: ServingConfig
    specs: list[InstanceSpec] = field(default_factory=list)


def _member_scenarios(scenario: Scenario | None, names: tuple[str, ...]) -> dict[str, Scenario | None]:
    """Each model's scenario (`Scenario.member`), or InputError naming what does not match."""
    if scenario is None:
        return dict.fromkeys(names)
    if not scenario.is_fleet:
        raise InputError(f"--scenario: scenario {scenario.name!r} plans one model, but the plan is a fleet plan "
                         f"({', '.join(names)}); give the fleet's scenario (its 'models' list)")
    listed = [m.name for m in scenario.models]
    unknown = [n for n in names if n not in listed]
    if unknown:
        raise InputError(f"pools[].model: the plan serves {', '.join(map(repr, unknown))}, which scenario "
                         f"{scenario.name!r} does not list; its models: {', '.join(listed)}")
    return {n: scenario.member(listed.index(n)) for n in names}


def fleet_members(plan: Plan, scenario: Scenario | None = None, *, max_per_pool: int | None = None,
                  link_gbit_per_s: float | None = None, link_rtt_ms: float | None = None,
                  link_jitter_ms: float | None = None, link_loss: float = 0.0) -> list[FleetMember]:
    """Each model's plan, serving config and instances (see the module docstring); errors name the model."""
    names = plan_models(plan)
    if not names:
        raise InputError("pools[].model: the plan names no model on its rows: it is a single-model plan")
    scenarios = _member_scenarios(scenario, names)
    if scenario is not None:
        check_inventory(scenario, plan)
    lines = link_shapes(plan, scenario, gbit_per_s=link_gbit_per_s, rtt_ms=link_rtt_ms, jitter_ms=link_jitter_ms,
                        loss=link_loss)
    specs = placement(plan, max_per_pool)
    members = []
    for name, part in split_plan(plan, names).items():
        try:
            config = ServingConfig.from_plan(part, scenarios[name], links=lines)
        except InfeasiblePlanError as exc:  # the model's own pools over the inventory (exit 3)
            raise InfeasiblePlanError(f"model {name!r}: {exc.reason}") from None
        except ValueError as exc:  # InputError included (exit 2)
            raise InputError(f"model {name!r}: {exc}") from None
        members.append(FleetMember(name, part, config, [s for s in specs if s.model == name]))
    return members


class Fleet:
    """A fleet running: each model's deployment (with its `router`) and the WAN lines they share.

    `deployments`: model → a `LocalCluster` or `RayDeployment` serving that model alone;
    `line_stats` / `close_lines`: the shared lines' counters and their shutdown."""

    def __init__(self, plan: Plan, deployments: Mapping[str, Any], *,
                 line_stats: Callable[[], dict[str, Any]] = dict, close_lines: Callable[[], None] = lambda: None,
                 max_per_pool: int | None = None) -> None:
        self.plan, self.deployments, self.max_per_pool = plan, dict(deployments), max_per_pool
        self._line_stats, self._close_lines = line_stats, close_lines

    @property
    def routers(self) -> dict[str, Any]:
        return {name: dep.router for name, dep in self.deployments.items()}

    @property
    def specs(self) -> list[InstanceSpec]:
        return [s for dep in self.deployments.values() for s in dep.specs]

    def stats(self) -> dict[str, Any]:
        """Each model's router and instances (`models`), and the shared lines (`links`)."""
        models = {}
        for name, dep in self.deployments.items():
            own = dep.stats()
            models[name] = {"router": own["router"], "instances": own["instances"]}
        return {"models": models, "links": self._line_stats()}

    # ---- live changes (`executor.elastic`: the surface of `LocalCluster` and `RayDeployment`) ----

    @property
    def router(self) -> FleetRouters:
        return FleetRouters(self.deployments)

    def start_instance(self, spec: InstanceSpec, *, joining: bool = True) -> None:
        """Start `spec` in its model's deployment (it joins that model's router)."""
        if spec.model not in self.deployments:
            raise ValueError(f"instance {spec.name!r}: model {spec.model!r} is not served here; "
                             f"served: {', '.join(self.deployments)}")
        self.deployments[spec.model].start_instance(spec, joining=joining)

    def stop_instance(self, name: str) -> None:
        for dep in self.deployments.values():
            if name in dep.router.instances or any(s.name == name for s in dep.specs):
                dep.stop_instance(name)
                return

    def free_resources(self) -> dict[str, float] | None:
        """The chips no actor holds (shared by the models: the cluster's), None when not accounted."""
        free_of = getattr(next(iter(self.deployments.values())), "free_resources", None)
        return free_of() if callable(free_of) else None

    def apply_plan(self, new: Plan, *, grace_s: float = 30.0, ready_timeout_s: float = 60.0,
                   timeout_s: float | None = None) -> ApplyReport:
        """Apply a new plan of the same models live (`executor.elastic.apply_specs`); refused
        (`FleetChangeUnsupported`) or InputError (a row naming no served model) before anything starts."""
        specs = self.placed(new)
        report = apply_specs(self, specs, grace_s=grace_s, ready_timeout_s=ready_timeout_s, timeout_s=timeout_s)
        if report.failed is None:
            self.plan = new
        return report

    def placed(self, new: Plan) -> list[InstanceSpec]:
        """The new plan's instances, once it is a change this fleet can make (see `apply_plan`)."""
        refuse_fleet_change(self, new)
        fleet_members(new, max_per_pool=self.max_per_pool)  # every row names one of its models; each can prefill
        return placement(new, self.max_per_pool)

    def close(self) -> None:
        for dep in self.deployments.values():
            dep.close()
        self._close_lines()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FleetRouters:
    """A fleet's routers seen as one by `executor.elastic`: each call goes to the router that knows
    the instance (its model's)."""

    def __init__(self, deployments: Mapping[str, Any]) -> None:
        self._routers = [dep.router for dep in deployments.values()]

    @property
    def routers(self) -> list[Any]:
        """Each model's router (`executor.elastic.dead_instances` asks each for its DOWN instances)."""
        return list(self._routers)

    @property
    def instances(self) -> dict[str, Any]:
        return {name: info for r in self._routers for name, info in r.instances.items()}

    @property
    def joining(self) -> set[str]:
        return set().union(*(r.joining for r in self._routers))

    def _of(self, name: str) -> Any:
        return next((r for r in self._routers if name in r.instances), self._routers[0])

    def drain(self, name: str) -> None:
        self._of(name).drain(name)

    def holding(self, name: str) -> int:
        return self._of(name).holding(name)

    def evacuate(self, name: str) -> int:
        return self._of(name).evacuate(name)

    def ping(self, names: list[str]) -> None:
        for r in self._routers:
            if own := [n for n in names if n in r.instances]:
                r.ping(own)


def local_fleet(plan: Plan, members: list[FleetMember], models: Mapping[str, Any], engine_config: Any, *,
                link_seed: int = 0, **cluster_kw: Any) -> Fleet:
    """The whole fleet in this process over TCP: one `LinkEmulator` per line shared by every model,
    one `LocalCluster` per model serving `models[name]` (a `ModelConfig` or a `Checkpoint`)."""
    from executor.cluster import LocalCluster  # the engines (torch) come in only here
    from executor.transport.link import LinkEmulator

    emulators, addresses = [], {}
    for k, (pair, shape) in enumerate(members[0].config.links.items() if members else ()):
        a, b = sorted(pair)
        emu = LinkEmulator(a, b, shape, seed=link_seed + k)
        addresses[(a, b)] = emu.start()
        emulators.append(emu)

    def close_lines() -> None:
        for emu in emulators:
            emu.close()

    deployments: dict[str, Any] = {}
    try:
        for m in members:
            deployments[m.name] = LocalCluster(m.specs, models[m.name], engine_config, m.config,
                                               link_addresses=addresses, **cluster_kw)
    except Exception:
        for dep in deployments.values():
            dep.close()
        close_lines()
        raise
    stats = lambda: {f"{e.dc_a}<->{e.dc_b}": e.stats() for e in emulators}  # noqa: E731
    return Fleet(plan, deployments, line_stats=stats, close_lines=close_lines)
