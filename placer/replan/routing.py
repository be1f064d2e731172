"""The day's routings, each computed once: a pool set's routing on a window's workload, shared by its runs.

in:  a window's resolved problem and its scenario's key (JSON), the plan template, a pool set
out: the plan :func:`placer.sim.simulate` would replay for those pools — routed by
     :func:`placer.optimize.evaluate_plan` (pools fixed) — or the error that routing raised

:func:`placer.sim.simulate` routes a plan without assignments itself, on every call. The day's loop
runs the same pools on the same window workload more than once — a stretch's run and its saturation
run (:func:`placer.replan.loop.capacity_of`, the same routing at another load: the routing depends on
the scenario, not on the simulated rate), windows mirrored about the peak (equal workloads) — so it
routes here once per (scenario, pools) and hands the simulator the routed plan, whose assignments make
it skip its own evaluation. The result is the same plan to the bit: the same function on the same
inputs (HiGHS is deterministic), the template's handoff kept as ``simulate`` keeps it.
"""

from __future__ import annotations

from placer.errors import InfeasiblePlanError, PlacerError
from placer.optimize import evaluate_plan
from placer.plan import Plan
from placer.replan.fleets import Pools, pools_plan


def pools_key(pools: Pools) -> tuple:
    """A pool set as a hashable key: (pool key, count) sorted."""
    return tuple(sorted((k, r.count) for k, r in pools.items()))


class Routings:
    """Memo of :func:`evaluate_plan` over the day (see the module docstring)."""

    def __init__(self) -> None:
        self._got: dict[tuple, Plan | PlacerError] = {}
        self.calls = 0  # routings computed (for the tests: what the memo saved)

    def replayable(self, problem, scenario_key: str, template: Plan, pools: Pools) -> Plan | None:
        """The plan to hand :func:`placer.sim.simulate` for ``pools`` on ``problem``: routed (with
        assignments) where :func:`evaluate_plan` routes it; the bare pools where it finds no routing
        (``simulate`` then replays it as given and says so in its warnings); None where routing fails
        otherwise (``simulate`` would raise the same error: no run)."""
        plan = pools_plan(template, pools)
        key = (scenario_key, pools_key(pools), plan.scenario == problem.name)
        if key not in self._got:
            self.calls += 1
            try:
                self._got[key] = evaluate_plan(problem, plan)
            except PlacerError as err:
                self._got[key] = err
        got = self._got[key]
        if isinstance(got, InfeasiblePlanError):
            return plan
        if isinstance(got, PlacerError):
            return None
        return got.model_copy(update={"handoff": template.handoff})
