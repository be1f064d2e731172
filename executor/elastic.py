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
(3) then they stop. Adds go first, so capacity never dips below the smaller plan.
An instance the deployment runs but the router no longer knows (unregistered, e.g. by
`DELETE /instances/{name}`) is *missing*: it is stopped, and started afresh if the new plan
has it (so re-posting the same plan restores it).
No torch, no ray here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from executor.placement import InstanceSpec


@dataclass(frozen=True)
class PlanDiff:
    add: list[InstanceSpec]
    remove: list[str]
    keep: list[str]

    @property
    def empty(self) -> bool:
        return not self.add and not self.remove


@dataclass
class ApplyReport:
    diff: PlanDiff
    joined: list[str] = field(default_factory=list)
    not_ready: list[str] = field(default_factory=list)  # started but never answered: stopped again
    drained: list[str] = field(default_factory=list)  # left with nothing in flight
    evacuated: dict[str, int] = field(default_factory=dict)  # left at the grace deadline: requests moved
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"add": [s.name for s in self.diff.add], "remove": self.diff.remove, "keep": self.diff.keep,
                "joined": self.joined, "not_ready": self.not_ready, "drained": self.drained,
                "evacuated": self.evacuated, "seconds": round(self.seconds, 3)}


def _same(a: InstanceSpec, b: InstanceSpec) -> bool:
    return (a.role, a.datacenter, a.chip, a.tp) == (b.role, b.datacenter, b.chip, b.tp)


def diff_specs(running: list[InstanceSpec], new: list[InstanceSpec]) -> PlanDiff:
    """What to start, what to stop, what stays (matched by instance name)."""
    old = {s.name: s for s in running}
    target = {s.name: s for s in new}
    keep = [n for n, s in target.items() if n in old and _same(old[n], s)]
    add = [s for n, s in target.items() if n not in keep]
    remove = [n for n in old if n not in keep]
    return PlanDiff(add, remove, keep)


def apply_specs(deployment: Any, new: list[InstanceSpec], *, grace_s: float = 30.0,
                ready_timeout_s: float = 30.0, poll_s: float = 0.02) -> ApplyReport:
    """Apply `new` to a running deployment; returns what happened. Every wait has a deadline."""
    t0 = time.monotonic()
    router = deployment.router
    missing = [s.name for s in deployment.specs if s.name not in router.instances]
    diff = diff_specs([s for s in deployment.specs if s.name not in missing], new)
    wanted = {s.name for s in new}
    diff = PlanDiff(diff.add, diff.remove + [n for n in missing if n not in wanted], diff.keep)
    report = ApplyReport(diff)
    for spec in diff.add:
        if spec.name in router.instances:  # replaced in place (role/dc/chip changed): drain the old one first
            _leave(deployment, router, spec.name, grace_s, poll_s, report)
        elif spec.name in missing:  # unregistered behind the deployment's back: start it afresh
            deployment.stop_instance(spec.name)
        deployment.start_instance(spec, joining=True)
    end = time.monotonic() + ready_timeout_s
    waiting = [s.name for s in diff.add]
    while waiting and time.monotonic() < end:
        waiting = [n for n in waiting if n in router.joining]
        if waiting:
            router.ping(waiting)
            time.sleep(poll_s)
    for spec in diff.add:
        if spec.name in waiting:
            report.not_ready.append(spec.name)
            deployment.stop_instance(spec.name)
        else:
            report.joined.append(spec.name)
    for name in diff.remove:
        if name in router.instances:
            _leave(deployment, router, name, grace_s, poll_s, report)
        else:  # missing and not in the new plan: nothing to drain
            deployment.stop_instance(name)
    report.seconds = time.monotonic() - t0
    return report


def _leave(deployment: Any, router: Any, name: str, grace_s: float, poll_s: float, report: ApplyReport) -> None:
    router.drain(name)
    end = time.monotonic() + grace_s
    while router.holding(name) and time.monotonic() < end:
        time.sleep(poll_s)
    if router.holding(name):
        report.evacuated[name] = router.evacuate(name)
    else:
        report.drained.append(name)
    deployment.stop_instance(name)


def apply_hook(deployment: Any, *, grace_s: float = 30.0, ready_timeout_s: float = 60.0):
    """A callable for a replanning job in `apply` mode: `hook(plan) -> report dict`.

    It applies the adopted plan to `deployment` (anything with `apply_plan`) live; the job
    calls it where it records the deployment request, e.g. in `placer.service.jobs.runner.execute`:
    `if policy.mode == "apply" and apply_hook is not None: apply_hook(candidate)`.
    """

    def hook(plan: Any) -> dict[str, Any]:
        return deployment.apply_plan(plan, grace_s=grace_s, ready_timeout_s=ready_timeout_s).to_dict()

    return hook
