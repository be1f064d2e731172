"""What the ILP promised vs what the simulator measures, at the plan's own load."""

from __future__ import annotations

import pytest

from placer.sim import SimConfig, simulate
from placer.sim.verify import agreement

#: P90 TTFT of one route is estimated from a fraction of the requests and sits where the
#: waiting-time law is steep; the overall figures are held to 10 %.
ROUTE_P90_TOLERANCE = 0.25


@pytest.mark.xfail(strict=True, reason=(
    "issue 42: since the heavy/light P split the flagship's plan sends every class over a line 81 % busy and "
    "its mix P90 is the light classes' P99.4 (the heavy 9.5 % are late), where the line's excess law "
    "(M/G/1-PS, Poisson arrivals) is 2.3-3x the simulated excess (bench_agreement.py --cases pdd-two-dc "
    "--breakdown): planned P90 1.78 s, simulated 0.85-0.95 s; attainment agrees (90.4 vs 91.6 %)"))
def test_pdd_two_dc_plan_delivers_the_predicted_p90_ttft_and_goodput(pdd_problem, pdd_plan, seed):
    sim = simulate(pdd_problem, pdd_plan, SimConfig(requests=100_000, seed=seed))
    a = agreement(pdd_problem, pdd_plan, sim)
    assert abs(a["ttft_p90_error"]) <= 0.10, a
    assert abs(a["goodput_error"]) <= 0.10, a
    for route in a["routes"]:
        assert abs(route["goodput_error"]) <= 0.10, route
        assert abs(route["ttft_p90_error"]) <= ROUTE_P90_TOLERANCE, route


def test_a_plan_with_relays_agrees_too(small_problem, small_plan, seed):
    assert any(r.pipeline == "P-RLD-MD" for r in small_plan.routes)  # the case this test is about
    # 160 000 requests (~4 s): this plan's RLD runs near its batch cap and its queue's bursts move the
    # mix's P90: its error spans +5..+25 % over seeds 1-4 and 7 at 40 000 requests (two equal-cost
    # plans alike), +6..+12 % at 160 000
    sim = simulate(small_problem, small_plan, SimConfig(requests=160_000, seed=seed))
    a = agreement(small_problem, small_plan, sim)
    assert abs(a["ttft_p90_error"]) <= 0.10, a
    assert abs(a["goodput_error"]) <= 0.10, a
    assert sim["rld_token_share"] == pytest.approx(a["ilp_rld_token_share"], abs=0.05)
