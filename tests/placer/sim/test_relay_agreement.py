"""ILP vs simulator on relay-heavy plans (issue 14, part 3): cheap remote decode, 5–10 Gbit/s
lines, low-hit classes. Each case prints its per-pipeline table (run with -s to see it)."""

from __future__ import annotations

import functools

import pytest

from placer.flows import RELAY_PIPELINES
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.sim.verify import agreement
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict

LOW_HIT = [
    {"name": "hot", "share": 0.5, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.97},
    {"name": "low", "share": 0.4, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.8},
    {"name": "odd", "share": 0.1, "input_tokens": 16384, "output_tokens": 128, "hit_rate": 0.1},
]


def _line(gbit_per_s: float) -> list[dict]:
    return [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": gbit_per_s, "rtt_ms": 30, "jitter_ms": 3}]


def _classes(classes: list[dict]) -> dict:
    return {"arrival_rps": 24.0, "classes": classes}


#: A route's simulated goodput is compared only where the run gives it enough requests that a
#: 10 % difference is at least three standard errors of the count (3/√n ≤ 0.1): below that a
#: 10 % miss is indistinguishable from the draw of classes and arrivals.
MIN_ROUTE_REQUESTS = 900

#: The one gap left on these cases (issue 14 part 3), measured: P-MD over the line. A P
#: instance packs short prompts into one forward, so their KV transfers start together
#: (on 10g-low-hit 19 % of line arrivals come in batches of 2–8) and the line holds more
#: transfers at once than the ILP's Poisson processor-sharing law (7.1 seen at arrival
#: against ρ/(1−ρ) = 5.7 at ρ = 0.85): a small transfer's slowdown is longer than the ILP's.
#: The relay routes agree within 10 %; where the optimum sends traffic P-MD over the line, that
#: route's goodput (10g-low-hit: −16 % on 1,097 requests) or, through it, the mix's P90 (5g: +10.2 %,
#: its P-MD line route +26 %) does not yet.
LINE_BUNCHING = pytest.mark.xfail(strict=True, reason=(
    "known gap, issue 14 part 3: P-MD over the line, whose transfers start in batches (prompts "
    "packed into one prefill forward) while the ILP's line law takes Poisson arrivals; simulated "
    "P90 22-48 % above and goodput up to 17 % below the ILP's on that route"))

CASES = {
    "10g-low-hit": dict(workload=_classes(LOW_HIT)),
    "5g-low-hit": dict(links=_line(5), workload=_classes(LOW_HIT)),
    "5g": dict(links=_line(5)),
    "10g-few-local-chips": dict(
        datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 6}}, {"name": "dc-b", "inventory": {"H20": 32}}]),
}
#: The cases where the P-MD-over-the-line gap shows (see LINE_BUNCHING): in the mix's P90, and in
#: a route's goodput that the run judges (10g-few-local-chips sends 2,664 requests that way and
#: agrees within 5 %; 5g's 580 are too few to judge).
MIX_OVER_THE_LINE = {"5g"}
ROUTE_OVER_THE_LINE = {"10g-low-hit"}


@functools.cache
def _agree(name: str) -> tuple[dict, dict]:
    """(simulation, agreement) of case ``name``'s optimal plan, solved and replayed once per session."""
    problem = resolve(parse_scenario(small_pdd_dict(**CASES[name])))
    plan = optimize(problem, SolveConfig(marginals=False))
    assert any(r.pipeline == "P-RLD-MD" for r in plan.routes)  # relay-heavy: what these cases are about
    sim = simulate(problem, plan, SimConfig(requests=30_000, seed=7))
    a = agreement(problem, plan, sim)
    print(f"\nALL P90 ILP {a['ilp_ttft_p90_s']:.3f} sim {a['sim_ttft_p90_s']:.3f} ({a['ttft_p90_error']:+.1%}) "
          f"goodput ILP {a['ilp_goodput_rps']:.2f} sim {a['sim_goodput_rps']:.2f} ({a['goodput_error']:+.1%})")
    for r in a["routes"]:
        print(f"{r['pipeline']:9s} {r['src']}->{r['dst']} {r['rps']:6.2f} rps  P90 ({r['ttft_p90_error']:+.1%})  "
              f"goodput ({r['goodput_error']:+.1%})")
    return sim, a


@pytest.mark.parametrize("name", [pytest.param(n, marks=LINE_BUNCHING) if n in MIX_OVER_THE_LINE else n
                                  for n in CASES])
def test_relay_heavy_plans_keep_their_p90_ttft_and_goodput(name):
    """The mix's P90 TTFT and goodput, each relay route's goodput and RLD's token share agree."""
    sim, a = _agree(name)
    assert abs(a["ttft_p90_error"]) <= 0.10, a
    assert abs(a["goodput_error"]) <= 0.10, a
    for route in a["routes"]:
        if route["pipeline"] in RELAY_PIPELINES and route["sim_requests"] >= MIN_ROUTE_REQUESTS:
            assert abs(route["goodput_error"]) <= 0.10, route
    assert sim["rld_token_share"] == pytest.approx(a["ilp_rld_token_share"], abs=0.05)


@pytest.mark.parametrize("name", [pytest.param(n, marks=LINE_BUNCHING) if n in ROUTE_OVER_THE_LINE else n
                                  for n in CASES])
def test_every_route_keeps_its_goodput(name):
    """Every route the run gives enough requests to judge agrees within 10 % on goodput."""
    _, a = _agree(name)
    judged = [r for r in a["routes"] if r["sim_requests"] >= MIN_ROUTE_REQUESTS]
    assert judged
    for route in judged:
        assert abs(route["goodput_error"]) <= 0.10, route
