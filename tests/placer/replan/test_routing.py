"""The day's routings computed once: the simulator gets the same plan, and the day the same figures."""

from __future__ import annotations

import pytest

from placer.optimize import SolveConfig, as_problem, optimize
from placer.replan import AdoptionRule
from placer.replan.fleets import Startup, pools_of, pools_plan
from placer.replan.loop import DayConfig, run_day
from placer.replan.routing import Routings
from placer.replan.timeline import Timeline, windows
from placer.sim import SimConfig, simulate
from placer.specs import parse_scenario
from tests.placer.conftest import MICRO


@pytest.fixture(scope="module")
def micro():
    scenario = parse_scenario(MICRO)
    return scenario, optimize(scenario, SolveConfig(marginals=False))


def test_a_pool_set_is_routed_once_per_workload_and_replays_as_the_simulator_routes_it(micro):
    scenario, plan = micro
    routings, pools = Routings(), pools_of(plan)
    routed = [routings.replayable(as_problem(scenario), "w0", plan, pools) for _ in range(2)]
    assert routings.calls == 1 and routed[0].assignments
    config = SimConfig(requests=200, seed=3)
    alone = simulate(scenario, pools_plan(plan, pools), config).data  # routes the bare pools itself
    assert simulate(scenario, routed[1], config).data == alone
    routings.replayable(as_problem(scenario), "w1", plan, pools)  # another workload: routed again
    assert routings.calls == 2


def test_the_days_figures_are_the_same_with_and_without_reusing_routings(micro):
    scenario, plan = micro
    timeline = Timeline(peak_to_trough=3.0, day_s=3 * 3600.0, peak_hour=1.5)  # windows 0 and 2 mirror
    assert windows(scenario, timeline)[0].rate_rps == windows(scenario, timeline)[2].rate_rps
    config = DayConfig(replan_every_s=3600.0, requests_per_window=300, solve=SolveConfig(marginals=False))
    runs = [run_day(scenario, timeline, plan, AdoptionRule(), Startup(startup_s=60.0, drain_s=30.0),
                    DayConfig(**{**config.__dict__, "reuse_routings": reuse})).data for reuse in (True, False)]
    for data in runs:
        del data["timing_s"]
    assert runs[0] == runs[1]
