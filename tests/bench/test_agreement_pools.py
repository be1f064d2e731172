"""``bench_agreement.py --random``'s steady runs (issue 42): warmed up past the decoders' fill, and measured over
several of their longest stays — a window shorter than a stay sees the KV at one level, not its law."""

from __future__ import annotations

import pytest

from placer.evaluate import analyze
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict


@pytest.fixture(scope="module")
def pools(bench_path):
    import agreement_pools

    return agreement_pools


@pytest.fixture(scope="module")
def small():
    problem = resolve(parse_scenario(small_pdd_dict()))
    return problem, optimize(problem, SolveConfig(marginals=False))


def test_a_steady_run_measures_several_of_the_decoders_longest_stays(pools, small):
    """SMALL_PDD (24 req/s, stays of ~10 s): 500 requests measure 20 s, under three stays; the steady run warms
    up past two stays and measures three."""
    problem, plan = small
    rps = problem.arrival_rps
    stay = pools.longest_stay_s(problem, plan, analyze(problem, plan))
    short = SimConfig(requests=500, seed=7)
    assert short.requests * (1 - short.warmup_fraction) / rps < 3 * stay
    steady = pools.steady_config(short, problem, plan, rps)
    warm = steady.requests * steady.warmup_fraction
    assert warm / rps >= pools.STAYS * stay * 0.99
    assert (steady.requests - warm) / rps >= 3 * stay * 0.99
    long = SimConfig(requests=100_000, seed=7)  # long enough already: kept as it is
    assert pools.steady_config(long, problem, plan, rps) == long


def test_the_pool_sampler_times_the_waits_for_kv_room(pools):
    """``--pools`` prints how long a decoder's arrivals waited for KV room beside the share that waited and the plan's
    law (:func:`placer.kv_wait.kv_wait_law`'s mean wait): a decoder fed past its KV — the sampler's waits are each
    waiting arrival's join to its admission, the first token it streams."""
    import heapq
    import random
    from types import SimpleNamespace

    from placer.sim.decode import DecodeInstance
    from placer.sim.metrics import TimeSeries
    from tests.placer.sim.test_engine import _Loop, _req

    im = SimpleNamespace(batch_cap=1 << 30, kv_capacity_tokens=20_000, step_s=lambda b, ctx: 0.02 + 0.001 * b)
    stats: dict = {}
    loop, rng, t, arrived = _Loop(), random.Random(3), 0.0, []
    with pools.pool_sampler(stats, (0.0, 1e9)):
        dec = DecodeInstance(loop, im, "MD", SimpleNamespace(), TimeSeries(10, 10))
        for rid in range(3000):
            t += rng.expovariate(2.0)
            req = _req(rid, n_in=1500, n_out=200)
            req.t_arr = t
            arrived.append(req)
            heapq.heappush(loop.heap, (t, -rid - 1, lambda tt, r: dec.join(r, tt, r.n_out), req))
        loop.run()
    row = stats[id(dec.pool)]
    waits = [r.t_first - r.t_arr for r in arrived if r.t_first - r.t_arr > 1e-9]
    assert len(waits) > 300  # a line forms
    assert row[5] == len(row[9]) == len(waits)
    assert sum(row[9]) / len(row[9]) == pytest.approx(sum(waits) / len(waits), rel=1e-9)
