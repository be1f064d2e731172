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
