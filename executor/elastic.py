"""Elastic plans: diff the running instances against a new plan and apply it live.

In: the running deployment (anything with `specs`, `router`, `start_instance(spec)`,
`stop_instance(name)`: `LocalCluster`, `RayDeployment`) and the new plan's
`InstanceSpec`s. Out: a `PlanDiff` (add / remove / keep, by instance name; a name
whose role, datacenter, chip or tp changed is removed and added) and an `ApplyReport`.

Applying: (1) new instances start and join the router only once they answered a
heartbeat (`Router.register(..., joining=True)`); (2) leaving instances are drained
— no new requests — and keep what they hold until it finishes or `grace_s` passes;
what is left then is moved to other instances (`Router.evacuate`: a new attempt
from the next undelivered token, so the client sees no gap and no duplicate);
(3) then they stop. Make-before-break (adds first, so capacity never dips below the
smaller plan) when the free chips hold the new instances; break-before-make (leaving
instances first) when they do not (`choose_strategy`); a change that fails puts the old
instances back. Instances the router no longer knows (unregistered) count as missing:
stopped, and started again if the plan has them; instances its heartbeats found DOWN (a dead
process) are never kept: stopped and started again if the plan has them. `executor.apply_operation` runs one
change at a time in the background and reports its progress (`GET /plan/status`). No torch, no ray here.

Fleets (several models, one router each: `executor.fleet.Fleet`) change live the same way —
the fleet presents its routers as one (each call goes to the instance's model's router), new
instances start in their model's deployment, and the strategy looks at the chips the models
share — for a new plan of the same models. Refused at once with `FleetChangeUnsupported`
(`refuse_fleet_change`; HTTP 501 naming what is unsupported, before anything starts): a model
added or removed, a fleet plan posted to a single-model deployment (or the reverse), and a fleet
whose models are pinned to GPUs apart (too few GPUs for every claim) — redeploy instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from executor.health import PeerState
from executor.placement import InstanceSpec, plan_models
from placer.change_strategy import BREAK_BEFORE_MAKE, MAKE_BEFORE_BREAK
from placer.change_strategy import choose_strategy as choose_by_resources
from placer.change_strategy import total

if TYPE_CHECKING:
    from placer.plan import Plan


class Deployment(Protocol):
    """What a live change drives (`LocalCluster`, `RayDeployment`, `executor.fleet.Fleet`): the running
    instances, the router (`instances`, `joining`, `drain`, `holding`, `evacuate`, `ping`), starting and
    stopping one instance, and `apply_plan`. Read with getattr where a deployment may lack them:
    `free_resources()` (chips accounted), `start_timeout_s` (a Ray start's wait), `deployments` (a
    fleet's models), `plan` (recorded once a change succeeds)."""

    @property
    def specs(self) -> list[InstanceSpec]: ...

    @property
    def router(self) -> Any: ...

    def start_instance(self, spec: InstanceSpec, *, joining: bool = True) -> None: ...

    def stop_instance(self, name: str) -> None: ...

    def apply_plan(self, new: Plan | list[InstanceSpec], *, grace_s: float = 30.0,
                   ready_timeout_s: float = 30.0) -> ApplyReport: ...


@dataclass(frozen=True)
class PlanDiff:
    add: list[InstanceSpec]
    remove: list[str]
    keep: list[str]

    @property
    def empty(self) -> bool:
        return not self.add and not self.remove


class ApplyError(Exception):
    """The new plan cannot be applied at all (its chips exceed what the cluster has)."""


class FleetChangeUnsupported(ApplyError):
    """A live change of a fleet that is not supported yet (the message names what)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"live plan changes: {what} is not supported yet; stop the deployment and start the "
                         "new plan with `placer deploy PLAN.json`")


def refuse_fleet_change(deployment: Deployment, plan: Plan) -> None:
    """FleetChangeUnsupported for a change a fleet cannot make live (see the module docstring)."""
    running = tuple(getattr(deployment, "deployments", None) or ())
    named = plan_models(plan)
    if not running and named:
        raise FleetChangeUnsupported(f"turning a single-model deployment into a fleet ({', '.join(named)})")
    if running and set(named) != set(running):
        raise FleetChangeUnsupported(f"changing the models served (running: {', '.join(running)}; the new plan: "
                                     f"{', '.join(named) or 'one model, named on no row'})")
    if running and any(s.gpu_ids for s in deployment.specs):
        raise FleetChangeUnsupported("changing a fleet whose models are pinned to GPUs apart (fewer GPUs than "
                                     "the instances claim)")


@dataclass
class ApplyReport:
    diff: PlanDiff
    joined: list[str] = field(default_factory=list)
    not_ready: list[str] = field(default_factory=list)  # started but never answered: stopped again
    drained: list[str] = field(default_factory=list)  # left with nothing in flight
    evacuated: dict[str, int] = field(default_factory=dict)  # left at the grace deadline: requests moved
    restored: list[str] = field(default_factory=list)  # a failed change: old instances started again
    strategy: str = MAKE_BEFORE_BREAK
    strategy_reason: str = ""
    failed: str | None = None  # why the change did not happen (None: it did)
    events: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"add": [s.name for s in self.diff.add], "remove": self.diff.remove, "keep": self.diff.keep,
                "joined": self.joined, "not_ready": self.not_ready, "drained": self.drained,
                "evacuated": self.evacuated, "restored": self.restored, "strategy": self.strategy,
                "strategy_reason": self.strategy_reason, "failed": self.failed, "events": self.events,
                "seconds": round(self.seconds, 3)}


def _same(a: InstanceSpec, b: InstanceSpec) -> bool:
    return (a.role, a.datacenter, a.chip, a.tp) == (b.role, b.datacenter, b.chip, b.tp)


def diff_specs(running: list[InstanceSpec], new: list[InstanceSpec], dead: frozenset[str] | set[str] = frozenset()
               ) -> PlanDiff:
    """What to start, what to stop, what stays (matched by instance name). An instance in `dead`
    (the router's heartbeats found it DOWN) is never kept: a plan that has it replaces it (stopped,
    then started again), so a change never counts a dead process as running capacity."""
    old = {s.name: s for s in running}
    target = {s.name: s for s in new}
    keep = [n for n, s in target.items() if n in old and n not in dead and _same(old[n], s)]
    add = [s for n, s in target.items() if n not in keep]
    remove = [n for n in old if n not in keep]
    return PlanDiff(add, remove, keep)


def dead_instances(router: Any) -> set[str]:
    """The registered instances the router's heartbeats found DOWN (a process that died, e.g. SIGKILLed);
    a fleet's (`executor.fleet.FleetRouters`): every model's router's."""
    dead: set[str] = set()
    for r in getattr(router, "routers", None) or [router]:
        health = getattr(r, "health", None)
        if health is not None:
            dead |= {n for n in list(r.instances) if health.state(n) is PeerState.DOWN}
    return dead


def _resources(specs: list[InstanceSpec]) -> dict[str, float]:
    """The Ray resources (``dc:NAME``, ``chip:NAME``) the instances claim: the rule's data adapter."""
    return total(spec.resources for spec in specs)


def _words(res: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(res.items()))


def choose_strategy(deployment: Deployment, running: list[InstanceSpec], diff: PlanDiff) -> tuple[str, str]:
    """Make-before-break when the free chips hold the new instances, else break-before-make
    (the leaving instances drain and stop first). A deployment that does not account chips
    (no `free_resources`, e.g. `LocalCluster`) always makes before it breaks. ApplyError when
    even the chips of the leaving instances would not be enough."""
    free_of = getattr(deployment, "free_resources", None)
    free = free_of() if callable(free_of) else None
    leaving = [s for s in running if s.name in diff.remove]
    choice = choose_by_resources(_resources(diff.add), free, _resources(leaving))  # the rule: placer.change_strategy
    if free is None:
        return MAKE_BEFORE_BREAK, "the deployment does not account chips: new instances start before old ones leave"
    if choice.strategy == MAKE_BEFORE_BREAK:
        return MAKE_BEFORE_BREAK, "the free chips hold the new instances: they start before the old ones leave"
    if not choice.feasible:
        raise ApplyError(f"the new plan needs {_words(choice.still_short)} more than the cluster has, even with the "
                         f"chips of the {len(leaving)} leaving instance(s); nothing was changed")
    return BREAK_BEFORE_MAKE, (f"{_words(choice.short)} short while the old plan runs: the {len(leaving)} leaving "
                               "instance(s) drain and stop first (capacity dips during the change)")


class _Change:
    """One application of a diff: every wait has a deadline, every step is an event."""

    def __init__(self, deployment: Deployment, report: ApplyReport, *, grace_s: float, ready_timeout_s: float,
                 poll_s: float, deadline: float, on_event: Callable[[dict[str, Any]], None] | None) -> None:
        self.deployment, self.router, self.report = deployment, deployment.router, report
        self.grace_s, self.ready_timeout_s, self.poll_s, self.deadline = grace_s, ready_timeout_s, poll_s, deadline
        self.on_event, self.t0 = on_event, time.monotonic()

    def event(self, instance: str, what: str, detail: str = "", **extra: Any) -> None:
        ev = {"t_s": round(time.monotonic() - self.t0, 3), "instance": instance, "event": what, **extra}
        if detail:
            ev["detail"] = detail
        self.report.events.append(ev)
        if self.on_event is not None:
            self.on_event(ev)

    def _until(self, own_s: float) -> float:
        return min(time.monotonic() + own_s, self.deadline)

    def leave(self, name: str) -> None:
        """Drain `name`; what it still holds at the grace deadline moves to other instances; stop it."""
        if name not in self.router.instances:
            return
        self.event(name, "draining")
        self.router.drain(name)
        end = self._until(self.grace_s)
        while self.router.holding(name) and time.monotonic() < end:
            time.sleep(self.poll_s)
        if self.router.holding(name):
            self.report.evacuated[name] = self.router.evacuate(name)
            self.event(name, "evacuated", f"{self.report.evacuated[name]} request(s) moved")
        else:
            self.report.drained.append(name)
            self.event(name, "drained")
        self.deployment.stop_instance(name)
        self.event(name, "stopped")

    def start(self, specs: list[InstanceSpec]) -> list[str]:
        """Start `specs`, wait until each answered; the names that never did (stopped again)."""
        started, failed = [], []
        for spec in specs:
            self.event(spec.name, "starting", f"{spec.role} in {spec.datacenter} on {spec.tp}x {spec.chip}")
            try:
                self.deployment.start_instance(spec, joining=True)
                started.append(spec.name)
            except Exception as exc:  # noqa: BLE001 - an instance that cannot start is reported, not raised
                failed.append(spec.name)
                self.event(spec.name, "not ready", f"{type(exc).__name__}: {exc}"[:300])
        end = self._until(self.ready_timeout_s)
        waiting = list(started)
        while waiting and time.monotonic() < end:
            waiting = [n for n in waiting if n in self.router.joining]
            if waiting:
                self.router.ping(waiting)
                time.sleep(self.poll_s)
        for name in started:
            if name in waiting:
                failed.append(name)
                self.event(name, "not ready", "no heartbeat answer before the deadline")
                self.deployment.stop_instance(name)
            else:
                self.event(name, "joined")
        return failed


def apply_specs(deployment: Deployment, new: list[InstanceSpec], *, grace_s: float = 30.0,
                ready_timeout_s: float = 30.0, poll_s: float = 0.02, timeout_s: float | None = None,
                on_event: Callable[[dict[str, Any]], None] | None = None) -> ApplyReport:
    """Apply `new` to a running deployment; returns what happened (`failed` says why it did not).

    Make-before-break (free chips allow): new instances start and join, then leaving ones drain.
    Break-before-make (they do not): leaving instances drain and stop, then new ones start. If
    a new instance never becomes ready, the started ones stop and the old instances that had left
    start again (`restored`): the deployment keeps running the old plan. `timeout_s` bounds the
    whole change (grace and readiness waits end at it). An instance the deployment runs but the
    router no longer knows (unregistered, e.g. by `DELETE /instances/{name}`) is stopped first, so
    a plan that has it starts it afresh: re-posting the same plan restores a deleted instance. One the
    heartbeats found DOWN (its process died) is not kept either: it is replaced (`diff_specs`' `dead`).
    """
    t0 = time.monotonic()
    for name in [s.name for s in deployment.specs if s.name not in deployment.router.instances]:
        deployment.stop_instance(name)  # missing (unregistered behind our back): started afresh if `new` has it
    running = list(deployment.specs)
    diff = diff_specs(running, new, dead_instances(deployment.router))
    report = ApplyReport(diff)
    try:
        report.strategy, report.strategy_reason = choose_strategy(deployment, running, diff)
    except ApplyError as exc:
        report.strategy, report.strategy_reason = "refused", "the cluster cannot hold the new plan"
        report.failed = str(exc)
        return report
    deadline = t0 + (timeout_s if timeout_s is not None else float("inf"))
    saved = getattr(deployment, "start_timeout_s", None)  # a Ray start blocks until the actor is placed
    if saved is not None:
        deployment.start_timeout_s = min(saved, ready_timeout_s)
    try:
        _change(deployment, running, diff, report, deadline, grace_s=grace_s, ready_timeout_s=ready_timeout_s,
                poll_s=poll_s, on_event=on_event)
    finally:
        if saved is not None:
            deployment.start_timeout_s = saved
    report.seconds = time.monotonic() - t0
    return report


def _change(deployment: Deployment, running: list[InstanceSpec], diff: PlanDiff, report: ApplyReport,
            deadline: float, *, grace_s: float, ready_timeout_s: float, poll_s: float,
            on_event: Callable[[dict[str, Any]], None] | None) -> None:
    change = _Change(deployment, report, grace_s=grace_s, ready_timeout_s=ready_timeout_s, poll_s=poll_s,
                     deadline=deadline, on_event=on_event)
    change.event("", "strategy", report.strategy_reason, strategy=report.strategy)
    new_names = {s.name for s in diff.add}
    first = diff.remove if report.strategy == BREAK_BEFORE_MAKE else [n for n in diff.remove if n in new_names]
    for name in first:  # break-before-make; or a name replaced in place (its old instance goes first)
        change.leave(name)
    report.not_ready = change.start(diff.add)
    report.joined = [s.name for s in diff.add if s.name not in report.not_ready]
    if report.not_ready:
        report.failed = (f"{len(report.not_ready)} new instance(s) never became ready: "
                         f"{', '.join(report.not_ready)}; the old plan keeps running")
        for name in report.joined:
            change.leave(name)
        change.deadline = time.monotonic() + ready_timeout_s  # putting the old plan back gets its own time
        left = [s for s in running if s.name in first]
        change.start(left)
        report.restored = [s.name for s in left if s.name in deployment.router.instances]
    else:
        for name in diff.remove:
            if name not in first:
                change.leave(name)
