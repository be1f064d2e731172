"""A fleet plan on Ray: each model's instances and router, the WAN lines shared, one HTTP front.

In: a fleet plan and its `FleetMember`s (`executor.fleet.fleet_members`), each model's weights
(`ModelSource`: a Hugging Face directory, an `Engine.save` file, or the tiny seeded model), the
engine settings and the `Runtime`. Out:

- `describe_fleet` — `--dry-run`: each model's instances (device, GPUs), router, pipelines,
  thresholds and handoff, grouped by model; then what the models share (node resources, lines).
- `ray_fleet` → a `Fleet`: one `LinkActor` per line, started once and carrying every model's KV;
  then one `RayDeployment` per model over those lines (its own actors, directory and router).
  Devices are decided for the whole fleet at once (`executor.devices.place_on_devices`: two
  models never share a GPU).
- `serve_fleet` — `placer deploy` of a fleet: the above behind one server whose requests go to
  the router of their `model` (`executor.server.create_app(models=…)`), until interrupted.

Importing this module needs neither ray nor torch nor the HTTP stack (as `executor.deploy`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor.deploy import RayDeployment, actor_classes, checkpoint_text, start_local_ray
from executor.describe import capped_note, instance_table, routing_lines, shared_lines
from executor.devices import Runtime, place_on_devices, resolve_runtime
from executor.engine.config import EngineConfig, ModelConfig
from executor.fleet import Fleet, FleetMember
from executor.request_log import BatchingRequestLog, open_sink

if TYPE_CHECKING:
    from placer.plan import Plan


@dataclass(frozen=True)
class ModelSource:
    """The weights one model of a fleet serves: `model_dir` (Hugging Face), `model_file` (`Engine.save`),
    else the tiny seeded model of `seed`."""

    model_dir: str | None = None
    model_file: str | None = None
    seed: int = 0


class SharedLog:
    """One request log for every model of a fleet: each model's router writes through its own view
    (`view(model)`), which tags each record with `extra["model"]`; the log closes with the last view."""

    def __init__(self, log: Any, models: list[str]) -> None:
        self.log, self._open = log, set(models)
        self._lock = threading.Lock()

    def view(self, model: str) -> _ModelLog:
        return _ModelLog(self, model)

    def _close(self, model: str) -> None:
        with self._lock:
            self._open.discard(model)
            last = not self._open
        if last:
            self.log.close()


@dataclass(frozen=True)
class _ModelLog:
    """A router's side of a `SharedLog` (`add`, `close`: what the router calls)."""

    shared: SharedLog
    model: str

    def add(self, record: Any) -> None:
        self.shared.log.add(dataclasses.replace(record, extra={**record.extra, "model": self.model}))

    def close(self) -> None:
        self.shared._close(self.model)


def describe_fleet(plan: Plan, members: list[FleetMember], runtime: Runtime | None = None,
                   served: Mapping[str, str] | None = None) -> str:
    """The fleet's placement as text, grouped by model (see the module docstring); `served`: what each
    model serves, in words."""
    specs = [s for m in members for s in m.specs]
    lines = [f"fleet plan {plan.scenario!r}: {len(members)} models, {len(specs)} instances"
             + capped_note(plan, specs)]
    if runtime is not None:
        lines.append(f"engines: {runtime.describe()}")
    for m in members:
        what = f"; serves {served[m.name]}" if served and m.name in served else ""
        lines.append(f"model {m.name}: {len(m.specs)} instances, its own router{what}")
        met = m.plan.metrics
        lines.append(f"  planned: {met.goodput_rps:.2f} req/s goodput at ${met.cost_usd_per_h:.2f}/h, BCR "
                     f"{met.bcr_requests_per_usd:.0f} req/$ (the planner's prediction: plan.models.{m.name})")
        lines += instance_table(m.specs, indent="  ")
        lines += routing_lines(m.plan, m.config, indent="  ", specs=m.specs)
    lines.append("shared by the models:")
    lines += ["  " + line for line in shared_lines(specs, members[0].config)]
    return "\n".join(lines)


def ray_fleet(plan: Plan, members: list[FleetMember], sources: Mapping[str, ModelSource], engine_config: EngineConfig,
              *, runtime: Runtime | None = None, max_per_pool: int | None = None,
              request_logs: Mapping[str, Any] | None = None, start_timeout_s: float = 180.0) -> Fleet:
    """The fleet on a running Ray (see the module docstring); partial starts are undone."""
    import ray

    if not ray.is_initialized():
        raise RuntimeError("start Ray first (ray.init, or start_local_ray)")
    gpus = ray.cluster_resources().get("GPU", 0.0)
    runtime = runtime or Runtime(backend=engine_config.backend, interpret=engine_config.backend == "triton")
    if runtime.device == "auto":
        runtime = resolve_runtime(runtime.backend, "auto", int(gpus))
    placed = {s.name: s for s in place_on_devices([s for m in members for s in m.specs], runtime, gpus)}
    _, LinkActor = actor_classes()
    lines: dict[tuple[str, str], Any] = {}
    deployments: dict[str, Any] = {}

    def close_lines() -> None:
        for actor in lines.values():
            ray.kill(actor)

    def line_stats() -> dict[str, Any]:
        return {f"{a}<->{b}": st for (a, b), st in zip(lines, ray.get([x.stats.remote() for x in lines.values()]))}

    try:
        for k, (pair, shape) in enumerate(members[0].config.links.items()):
            a, b = sorted(pair)
            lines[(a, b)] = LinkActor.remote(a, b, dataclasses.asdict(shape), k)
        addresses = dict(zip(lines, ray.get([x.address.remote() for x in lines.values()], timeout=start_timeout_s)))
        for m in members:
            src = sources.get(m.name, ModelSource())
            deployments[m.name] = RayDeployment(
                m.plan, ModelConfig(), engine_config, m.config, seed=src.seed, max_per_pool=max_per_pool,
                request_log=(request_logs or {}).get(m.name), model_file=src.model_file, model_dir=src.model_dir,
                runtime=runtime, start_timeout_s=start_timeout_s, specs=[placed[s.name] for s in m.specs],
                link_addresses=addresses)
    except Exception:
        for dep in deployments.values():
            dep.close()
        close_lines()
        raise
    return Fleet(plan, deployments, line_stats=line_stats, close_lines=close_lines, max_per_pool=max_per_pool)


def serve_fleet(plan: Plan, members: list[FleetMember], sources: Mapping[str, ModelSource],
                engine_config: EngineConfig, *, address: str | None = None, max_per_pool: int | None = None,
                runtime: Runtime | None = None, request_log: str | None = None, host: str = "127.0.0.1",
                port: int = 8000, echo: Callable[[str], None] = print, token: str | None = None,
                protect_completions: bool = False) -> None:
    """Deploy the fleet on Ray and serve it on `host:port` until interrupted (as `executor.deploy.serve`:
    `address` None starts a local Ray emulating the datacenters; one request log for every model,
    each record tagged with its model: `SharedLog`)."""
    import ray

    from executor.server import ServedModel, create_app
    from placer.service.http import serve as serve_http  # header deadline, connection caps

    if address is None:
        start_local_ray([s for m in members for s in m.specs])
    else:
        ray.init(address=address, log_to_driver=False)
    fleet, shared = None, None
    try:
        names = [m.name for m in members]
        shared = SharedLog(BatchingRequestLog(open_sink(request_log)), names) if request_log else None
        texts = {m.name: checkpoint_text(sources.get(m.name, ModelSource()).model_dir, m.config) for m in members}
        members = [dataclasses.replace(m, config=texts[m.name][1]) for m in members]
        fleet = ray_fleet(plan, members, sources, engine_config, runtime=runtime, max_per_pool=max_per_pool,
                          request_logs={n: shared.view(n) for n in names} if shared else None)
        echo(f"engines: {next(iter(fleet.deployments.values())).runtime.describe()}")
        echo(f"serving {', '.join(fleet.deployments)} on http://{host}:{port}/v1/completions "
             "(the request's 'model' picks one; Ctrl-C stops)")
        models = {name: ServedModel(dep.router, texts[name][0]) if texts[name][0] else ServedModel(dep.router)
                  for name, dep in fleet.deployments.items()}
        serve_http(create_app(models=models, deployment=fleet, token=token, protect_completions=protect_completions),
                    host=host, port=port, log_level="warning")
    finally:
        if fleet is not None:
            fleet.close()  # each router closes its view: the shared log with the last
        elif shared is not None:
            shared.log.close()
        ray.shutdown()
