"""ILP vs simulator on relay-heavy plans (issue 14, part 3): cheap remote decode, 5–10 Gbit/s
lines, low-hit classes. Each case prints its per-pipeline table (run with -s to see it)."""

from __future__ import annotations

import pytest

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


#: P90 TTFT of the whole mix is held to 10 % where it is; the known gap is marked with its
#: measured cause (the goodput still agrees within 10 % there).
GAP = pytest.mark.xfail(strict=True, reason=(
    "known gap, issue 14 part 3, on a 5 Gbit/s line with low-hit classes: simulated P90 TTFT +12.4 % "
    "above the ILP's (the relay route +19.7 %). Every route's goodput agrees (within 5 %), but the "
    "mix's P90 sits where its CDF is flat; and on the relay route RLD "
    "admission waits in bursts (p99 0.6 s) when the line's processor-sharing transfers bunch and "
    "hold RLD's KV — not in the ILP's laws yet"))

CASES = {
    "10g-low-hit": dict(workload=_classes(LOW_HIT)),
    "5g-low-hit": pytest.param(dict(links=_line(5), workload=_classes(LOW_HIT)), marks=GAP),
    "5g": dict(links=_line(5)),
    "10g-few-local-chips": dict(
        datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 6}}, {"name": "dc-b", "inventory": {"H20": 32}}]),
}


def _agree(changes: dict) -> tuple[dict, dict]:
    problem = resolve(parse_scenario(small_pdd_dict(**changes)))
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


@pytest.mark.parametrize("changes", CASES.values(), ids=CASES.keys())
def test_relay_heavy_plans_keep_their_p90_ttft_and_goodput(changes):
    sim, a = _agree(changes)
    assert abs(a["goodput_error"]) <= 0.10, a
    for route in a["routes"]:
        assert abs(route["goodput_error"]) <= 0.10, route
    assert sim["rld_token_share"] == pytest.approx(a["ilp_rld_token_share"], abs=0.05)
    assert abs(a["ttft_p90_error"]) <= 0.10, a
