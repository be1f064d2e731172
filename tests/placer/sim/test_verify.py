"""`optimize --verify`: simulate the plan and tighten the utilisation caps until the SLA holds."""

from __future__ import annotations

from placer.problem import resolve
from placer.sim import SimConfig
from placer.sim.verify import verify_plan
from placer.specs import parse_scenario
from placer.workload import Burstiness
from tests.placer.sim.conftest import small_pdd_dict

#: More chips and a wider line than SMALL_PDD, so that lower caps still have a plan.
ROOMY = small_pdd_dict(
    datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 16}}, {"name": "dc-b", "inventory": {"H20": 32}}],
    links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 25, "rtt_ms": 30, "jitter_ms": 3}],
)


def test_bursty_traffic_misses_the_sla_until_verify_tightens_the_caps(seed):
    problem = resolve(parse_scenario(ROOMY))
    lines: list[str] = []
    # the planner assumes Poisson arrivals; bursts of 2x the mean break its plan's P90
    config = SimConfig(requests=10_000, seed=seed, arrivals="bursty", burstiness=Burstiness(2.0, 0.2, 3.0))
    outcome = verify_plan(problem, None, rounds=4, config=config, log=lines.append)
    first, last = outcome.rounds[0], outcome.rounds[-1]
    assert not first["holds"] and first["sim_ttft_p90_s"] > problem.ttft_p90_s
    assert outcome.holds and last["sim_ttft_p90_s"] <= problem.ttft_p90_s
    caps = [r["utilization_cap"] for r in outcome.rounds]
    assert caps == sorted(caps, reverse=True) and caps[-1] < caps[0]
    assert last["sim_bcr_requests_per_usd"] < first["sim_bcr_requests_per_usd"]  # safety costs money
    assert sum(line.startswith("verify round") for line in lines) == len(outcome.rounds)
    assert "meets the SLA" in outcome.plan.notes[-1]


def test_a_plan_that_already_holds_is_kept(small_problem, small_plan, seed):
    outcome = verify_plan(small_problem, small_plan, rounds=3, config=SimConfig(requests=5_000, seed=seed))
    assert outcome.holds and len(outcome.rounds) == 1
    assert outcome.plan.pools == small_plan.pools
