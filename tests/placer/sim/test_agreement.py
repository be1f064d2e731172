"""What the ILP promised vs what the simulator measures, at the plan's own load."""

from __future__ import annotations

import pytest

from placer.evaluate import analyze
from placer.sim import SimConfig, simulate
from placer.sim import engine as sim_engine
from placer.sim.links import WanLink
from placer.sim.verify import agreement

#: P90 TTFT of one route is estimated from a fraction of the requests and sits where the
#: waiting-time law is steep; the overall figures are held to 10 %.
ROUTE_P90_TOLERANCE = 0.25


# issue 42: the flagship's plan sends every class over a line 81 % busy and its mix P90 is the light classes'
# P99.4 (the heavy 9.5 % are late), so it reads the line's excess deep in its tail: priced by what feeds the line
# (placer.line_law), its batch-mates at min(b, b') and its count's variance L + R·L² (placer.ttft_tail.LineLoad),
# planned 1.016 s vs simulated 0.949 / 0.949 / 0.903 / 0.921 s at seeds 1 / 2 / 3 / 7 (100,000 requests):
# −6.6 % to −11.2 % (1.265 s, −33 %, with the geometric count and mates at full size)
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


def test_the_flagship_line_is_priced_by_what_feeds_it(pdd_problem, pdd_plan, seed, monkeypatch):
    """Issue 42: the flagship's heavy classes leave a whole P instance each at the end of its prefill, more
    evenly than Poisson arrivals, and fewer of their transfers overlap on the 81 %-busy line: the simulated
    excess over the unloaded transfer is a third to two fifths of the M/G/1-PS law's. The plan's law, fed by
    each P instance's departures (placer.line_law), stays above the simulated mean for every class (a
    promise on the safe side) and within 1.8x of it (the Poisson law: 2.5-3x)."""
    start: dict[int, tuple[float, float, float]] = {}
    excess: dict[float, list[float]] = {}
    add, landed = WanLink.add, sim_engine.Simulation.kv_landed

    def timed_add(link, req, n_bytes, t):
        start[req.rid] = (t, n_bytes / link.rate + link.rtt_s, req.hit)
        return add(link, req, n_bytes, t)

    def timed_landed(sim, req, t):
        if req.rid in start and req.rid >= 3_000:
            t0, unloaded, hit = start[req.rid]
            excess.setdefault(hit, []).append(t - t0 - unloaded)
        return landed(sim, req, t)

    monkeypatch.setattr(WanLink, "add", timed_add)
    monkeypatch.setattr(sim_engine.Simulation, "kv_landed", timed_landed)
    simulate(pdd_problem, pdd_plan, SimConfig(requests=30_000, seed=seed))
    flows = analyze(pdd_problem, pdd_plan).flows
    for c in pdd_problem.classes:
        mine = [f for f in flows if f.request_class == c.name and f.rps > 0]
        planned = sum(f.rps * f.wait.wan_excess_mean_s for f in mine) / sum(f.rps for f in mine)
        simulated = [e for hit, rows in excess.items() if abs(hit - c.hit_rate) < 1e-9 for e in rows]
        mean = sum(simulated) / len(simulated)
        assert mean <= planned <= 1.8 * mean, (c.name, planned, mean)
