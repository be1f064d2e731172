"""A trace that drifts a P instance's load (issue 42, rnd-7-19-trace): the queue lives each long window at that
window's load, so its wait is the mixture over the windows, not the stationary law at the mean load."""

from __future__ import annotations

import json
import random

import pytest

from placer.evaluate import analyze
from placer.flows import instance
from placer.load_drift import drift_points
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.queue_laws import p_instance_laws
from placer.sim import SimConfig, simulate
from placer.specs import parse_scenario
from placer.workload.fit import trace_arrival_rps


def _times(rate_rps: float, span_s: float, blocks_s: float | None, rng: random.Random, swing: float = 0.6) -> list[float]:
    """Arrival times over ``span_s``: Poisson at ``rate_rps``, or, with ``blocks_s``, Poisson at (1 + ``swing``)×
    the rate for a block and (1 − ``swing``)× for the next (the same mean rate, drifting)."""
    out, t = [], 0.0
    while t < span_s:
        busy = blocks_s is not None and int(t // blocks_s) % 2 == 0
        rate = rate_rps if blocks_s is None else rate_rps * (1.0 + swing if busy else 1.0 - swing)
        t += rng.expovariate(rate)
        out.append(t)
    return out


def test_independent_requests_read_no_drift_and_a_drifting_stream_its_loads():
    rng = random.Random(5)
    steady = [(t, 0.5, 0.2) for t in _times(5.0, 2000.0, None, rng)]
    assert drift_points(steady, relax_s=1.0) == []  # the windows spread as independent requests do
    drifting = [(t, 0.5, 0.2) for t in _times(5.0, 2000.0, 60.0, rng)]
    points = drift_points(drifting, relax_s=1.0)
    assert sum(w for w, _ in points) == pytest.approx(1.0)
    assert min(f for _, f in points) < 0.8 and max(f for _, f in points) > 1.4
    assert sum(w * f for w, f in points) > 1.0  # arrivals come where the load is: weighted toward the busy blocks


def _trace(path, times: list[float]) -> str:
    with open(path, "w") as f:
        for t in times:
            f.write(json.dumps({"timestamp": round(t * 1000), "input_length": 6000, "output_length": 64,
                                "hit_rate": 0.0}) + "\n")
    return str(path)


def _scenario(trace: str) -> dict:
    return {"name": "drift", "model": "llama-3.1-8b", "kv_dtype": "bf16",
            "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 8}}],
            "workload": {"arrival_rps": trace_arrival_rps(trace), "trace": trace},
            "sla": {"ttft_p90_s": 1.5, "tpot_s": 0.05}, "options": {"tp_degrees": [1]}}


def test_a_trace_that_drifts_its_p_load_is_priced_as_it_is_replayed(tmp_path):
    """Half an hour of one class, Poisson throughout or in 300-s blocks busier and quieter than the mean (the busy
    blocks as busy as the quasi-static law holds, :data:`placer.load_drift.WINDOW_RELAXATIONS`): the plan (the same
    for both: the fitted classes do not see the order) promises on the blocks a TTFT P90 above the stationary
    law's, and the replay of the blocks sees it (0.686 s: the drift's law 0.671, the stationary law 0.610)."""
    rng = random.Random(11)
    smooth = _trace(tmp_path / "smooth.jsonl", _times(8.0, 1800.0, None, rng))
    flat = resolve(parse_scenario(_scenario(smooth)))
    plan = optimize(flat, SolveConfig(marginals=False, time_limit_s=10))
    counts = {p.key: p.count for p in plan.pools if p.count > 0}
    laws = p_instance_laws(flat, plan, counts, {k: instance(flat, k.chip, k.tp) for k in counts})
    rho = max(part.law.rho for parts in laws.values() for part in parts)
    # the busiest instance's busy blocks as busy as the quasi-static law holds (their queue forgets within a window
    # of four relaxations at the mean load: its relaxation, ∝ ρ/(1 − ρ)², within ~2.5× the mean load's)
    swing = ((1.0 - (1.0 - rho) / 1.6) / rho - 1.0) / 1.3
    blocks = _trace(tmp_path / "blocks.jsonl", _times(8.0, 1800.0, 300.0, rng, swing))
    problem = resolve(parse_scenario(_scenario(blocks)))
    drifted = analyze(problem, plan).metrics.ttft_p90_s
    stationary = analyze(flat, plan).metrics.ttft_p90_s
    assert drifted > 1.08 * stationary
    scale = problem.arrival_rps / trace_arrival_rps(blocks)
    sim = simulate(problem, plan, SimConfig(requests=20_000, seed=3, workload="trace", trace=blocks,
                                            trace_time_scale=scale))
    assert sim["ttft_p90_s"] == pytest.approx(drifted, rel=0.1)
    assert sim["ttft_p90_s"] > 1.08 * stationary
