"""One live plan change at a time, in the background, observable while it runs (`GET /plan/status`).

In: a deployment (`executor.elastic.Deployment`), the new plan and its instances. Out: `ApplyOperation`
(`start`, `status`, `wait`): the change applied by `executor.elastic.apply_specs` in a thread, its events as
they happen, and — once it succeeded — the deployment and its router following the new plan
(`executor.set_queues.follow_plan`); `ApplyBusy` while another runs; `apply_hook`, the callable a replanning
job in `apply` mode calls. Split from `executor.elastic`. No torch, no ray here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from executor.elastic import Deployment, apply_specs
from executor.placement import InstanceSpec
from executor.set_queues import follow_plan

if TYPE_CHECKING:
    from placer.plan import Plan


class ApplyBusy(Exception):
    """A plan change is already in progress."""


class ApplyOperation:
    """One live plan change at a time, in a background thread, observable while it runs.

    `start` returns at once; `status()` is what `GET /plan/status` serves: `state` (idle,
    applying, succeeded, failed), `strategy` and why, the `events` so far (each instance
    starting / joined / not ready / draining / drained / evacuated / stopped, with seconds since
    the start), `error` when it failed, and the final `report`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._status: dict[str, Any] = {"state": "idle", "events": []}
        self._thread: threading.Thread | None = None

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {**self._status, "events": list(self._status["events"])}

    def start(self, deployment: Deployment, plan: Plan | None, specs: list[InstanceSpec], *, grace_s: float,
              ready_timeout_s: float, timeout_s: float) -> dict[str, Any]:
        """Begin applying `plan` (placed as `specs`; None: specs that come from no plan); ApplyBusy while
        another change runs."""
        with self._lock:
            if self._status["state"] == "applying":
                raise ApplyBusy(f"a plan change started {time.time() - self._status['started_unix_s']:.0f} s ago "
                                "is in progress; see GET /plan/status")
            self._status = {"state": "applying", "plan": plan.scenario if plan is not None else None, "strategy": None,
                            "strategy_reason": None, "events": [], "error": None, "report": None,
                            "target": [s.name for s in specs], "timeout_s": timeout_s,
                            "started_unix_s": time.time(), "finished_unix_s": None}
            self._thread = threading.Thread(target=self._run, name="plan-apply", daemon=True,
                                            args=(deployment, plan, specs, grace_s, ready_timeout_s, timeout_s))
            self._thread.start()
            return {**self._status, "events": []}

    def _event(self, ev: dict[str, Any]) -> None:
        with self._lock:
            self._status["events"].append(ev)
            if ev["event"] == "strategy":
                self._status.update(strategy=ev["strategy"], strategy_reason=ev.get("detail"))

    def _run(self, deployment: Deployment, plan: Plan | None, specs: list[InstanceSpec], grace_s: float,
             ready_timeout_s: float, timeout_s: float) -> None:
        try:
            report = apply_specs(deployment, specs, grace_s=grace_s, ready_timeout_s=min(ready_timeout_s, timeout_s),
                                 timeout_s=timeout_s, on_event=self._event)
            error = report.failed
            if error is None:
                follow_plan(deployment, plan)
            result = report.to_dict()
        except Exception as exc:  # noqa: BLE001 - a bug or a dead cluster: the status says so
            error, result, report = f"{type(exc).__name__}: {exc}", None, None
        with self._lock:
            self._status.update(state="failed" if error else "succeeded", error=error, report=result,
                                finished_unix_s=time.time())
            if report is not None:
                self._status.update(strategy=report.strategy, strategy_reason=report.strategy_reason)

    def wait(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Block until the change in progress ends (tests, scripts); its status."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return self.status()


def apply_hook(deployment: Deployment, *, grace_s: float = 30.0,
               ready_timeout_s: float = 60.0) -> Callable[[Plan], dict[str, Any]]:
    """A callable for a replanning job in `apply` mode: `hook(plan) -> report dict`.

    It applies the adopted plan to `deployment` (anything with `apply_plan`) live; the job
    calls it where it records the deployment request, e.g. in `placer.service.jobs.runner.execute`:
    `if policy.mode == "apply" and apply_hook is not None: apply_hook(candidate)`.
    """

    def hook(plan: Plan) -> dict[str, Any]:
        return deployment.apply_plan(plan, grace_s=grace_s, ready_timeout_s=ready_timeout_s).to_dict()

    return hook
