"""The replanning loop over a (compressed) day: the job's rule decides, start-up is charged, the oracle bounds.

A "day" of 4 one-hour windows (the diurnal cycle compressed into it) on SMALL_PDD (two datacenters,
a line, relays), whose plans the simulator confirms (on MICRO the planner is conservative enough
that the plan for the day's mean carries the peak in simulation, and beats every plan on BCR);
the replanned fleet starts from the plan for the trough. Each run solves ~12 times: marked slow.
"""

from __future__ import annotations

import pytest

from placer.optimize import SolveConfig, optimize
from placer.replan import AdoptionRule
from placer.replan.fleets import Startup
from placer.replan.loop import DayConfig, run_day
from placer.replan.timeline import Timeline, windows
from placer.specs import parse_scenario
from bench.agreement_cases import small_pdd_dict

pytestmark = pytest.mark.slow

TIMELINE = Timeline(peak_to_trough=4.0, day_s=4 * 3600.0, peak_hour=2.0)
CONFIG = DayConfig(replan_every_s=3600.0, requests_per_window=400)
FAST = Startup(startup_s=60.0, drain_s=30.0)


@pytest.fixture(scope="module")
def scenario():
    return parse_scenario(small_pdd_dict())


@pytest.fixture(scope="module")
def trough_plan(scenario):
    trough = min(windows(scenario, TIMELINE), key=lambda w: w.rate_rps)
    return optimize(trough.scenario, SolveConfig(marginals=False))


@pytest.fixture(scope="module")
def day(scenario, trough_plan):
    return run_day(scenario, TIMELINE, trough_plan, AdoptionRule(min_bcr_gain_pct=5.0), FAST, CONFIG).data


def test_replanning_applies_exactly_the_plans_the_rule_adopts(day):
    adopted = [c for c in day["changes"] if c["verdict"] == "ADOPTED"]
    assert day["fleets"]["replanned"]["changes"] == len(adopted) > 0
    for c in day["changes"]:
        if c["verdict"] == "ADOPTED" and "carries only" not in c["reason"]:
            assert c["gain_pct"] >= 5.0


def test_replanning_never_applies_a_plan_the_hysteresis_rejects(scenario, trough_plan):
    data = run_day(scenario, TIMELINE, trough_plan, AdoptionRule(min_bcr_gain_pct=5.0, mode="propose"), FAST,
                   CONFIG).data
    assert {c["verdict"] for c in data["changes"]} <= {"PROPOSED", "UNCHANGED", "SKIPPED"}
    assert data["fleets"]["replanned"]["changes"] == 0


def test_the_oracle_bounds_every_fleet_on_bcr(day):
    oracle = day["fleets"]["oracle"]["bcr_requests_per_usd"]
    for name in ("static", "peak", "replanned"):
        assert day["fleets"][name]["bcr_requests_per_usd"] <= oracle * 1.02, name  # 2 %: the sampled windows


def test_a_start_up_longer_than_the_window_makes_replanning_lose_to_the_peak_plan(scenario, trough_plan, day):
    slow = run_day(scenario, TIMELINE, trough_plan, AdoptionRule(min_bcr_gain_pct=5.0),
                   Startup(startup_s=2 * 3600.0, drain_s=30.0), CONFIG).data
    peak, replanned = slow["fleets"]["peak"], slow["fleets"]["replanned"]
    assert replanned["sla_attainment"] < peak["sla_attainment"] - 0.05
    # with quick start-ups the same loop keeps up with the peak plan
    assert day["fleets"]["replanned"]["sla_attainment"] > replanned["sla_attainment"]


def test_a_higher_hysteresis_never_makes_more_changes(scenario, trough_plan):
    from placer.replan.sweep import sweep_replanning

    rows = sweep_replanning(scenario, TIMELINE, trough_plan, AdoptionRule(), FAST, CONFIG, "hysteresis",
                            [0.0, 1000.0])
    assert rows[0]["changes"] >= rows[1]["changes"]
