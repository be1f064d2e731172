"""The proving rounds' cutoff (issue 47): HiGHS need not find plans no better than the last one plus the gap the
proof allows, and the bound it hands back still holds for every plan (the certificate a user reads as the gap)."""

import pytest

from placer.ilp import dinkelbach
from placer.ilp.backends import Status, solve
from placer.ilp.config import SolveConfig
from placer.ilp.dinkelbach import TARGET_GAP, solve_objective
from placer.ilp.formulation import build, pdd_architecture
from tests.placer.ilp.test_ilp import _brute_force_ratio, _random_micro
from tests.support import knapsack


def test_a_cutoff_above_the_optimum_keeps_the_plan_and_bounds_every_plan():
    """Nothing beats 13 (the optimum is 12.5): a plan at least as good as the one handed in (11) comes back, and the
    bound holds for every plan — not the plan's own value, which HiGHS reports once the cutoff pruned the rest."""
    m = knapsack()
    res = solve(m, "ortools", 10, hint=[2.0, 1.0, 2.5], cutoff=13.0)
    assert res.status is Status.OPTIMAL
    assert m.violations(res.values) == [] and res.objective >= 11.0 - 1e-9
    assert res.bound >= 12.5


def test_a_cutoff_below_the_optimum_still_finds_it():
    res = solve(knapsack(), "ortools", 10, hint=[2.0, 1.0, 2.5], cutoff=11.5)
    assert res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(12.5) and res.bound >= 12.5 - 1e-6


def test_a_minimisation_reads_the_cutoff_in_its_own_sense():
    m = knapsack()
    m.maximize, m.objective = False, {i: -c for i, c in m.objective.items()}
    res = solve(m, "ortools", 10, hint=[2.0, 1.0, 2.5], cutoff=-13.0)
    assert res.status is Status.OPTIMAL and res.bound <= -12.5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gap_proven_with_the_cutoff_holds_against_brute_force(seed, monkeypatch):
    """Micro scenarios proven with the cutoff on every model (CUTOFF_INTEGERS 0): the ratio is within the gap the
    solve reports of the best over every integer assignment, and each proving round got the cutoff."""
    problem = _random_micro(seed)
    monkeypatch.setattr(dinkelbach, "CUTOFF_INTEGERS", 0)
    cutoffs = []
    real = dinkelbach.solve
    monkeypatch.setattr(dinkelbach, "solve", lambda *a, **k: cutoffs.append(k.get("cutoff")) or real(*a, **k))
    form = build(problem, pdd_architecture(problem))
    outcome = solve_objective(form, SolveConfig(marginals=False))
    brute = _brute_force_ratio(problem)
    assert any(c is not None for c in cutoffs), f"no round proved with a cutoff: {cutoffs}"
    assert outcome.mip_gap <= TARGET_GAP
    assert brute * (1 - outcome.mip_gap) * (1 - 1e-6) <= outcome.ratio <= brute * (1 + 1e-6)


def test_a_cutoff_round_stopped_by_its_limit_keeps_the_plan_and_its_bound():
    """HiGHS drops a hint that does not beat the cutoff, so a limit leaves it with no plan of its own: the last plan
    stands, with HiGHS's proven bound (never below the cutoff) — not NO_SOLUTION and the bound lost; without a finite
    bound there is nothing to keep."""
    from placer.ilp.highs import _out_of_time

    m = knapsack()
    hint = [2.0, 1.0, 2.5]
    kept = _out_of_time(m, hint, 11.5, 14.0, 1.0)
    assert kept.status is Status.FEASIBLE and kept.values == [2.0, 1.0, 2.5] and m.violations(kept.values) == []
    assert kept.objective == pytest.approx(m.objective_value(kept.values)) and kept.bound == 14.0
    assert _out_of_time(m, hint, 11.5, 9.0, 1.0).bound == 11.5  # what the cutoff pruned is bounded by it
    assert _out_of_time(m, hint, 11.5, float("inf"), 1.0).status is Status.NO_SOLUTION
