"""Single solves fast (issue 47): HiGHS's sub-MIP heuristics off where a round only proves, the same optimum."""

from pathlib import Path

import pytest

from placer.ilp import dinkelbach, highs
from placer.ilp.backends import Status, solve
from placer.ilp.config import SolveConfig
from placer.ilp.dinkelbach import solve_objective
from placer.ilp.formulation import build, pdd_architecture
from placer.optimize import as_problem
from placer.specs import load_scenario
from tests.support import knapsack


@pytest.mark.parametrize("hint", [None, [2.0, 2.0, 1.5]], ids=["cold", "from the optimum"])
def test_a_milp_without_sub_mip_heuristics_reaches_the_same_optimum(hint):
    res = solve(knapsack(), "ortools", 10, hint=hint, sub_mips=False)
    assert res.status is Status.OPTIMAL
    assert res.objective == pytest.approx(12.5) and res.values == pytest.approx([2.0, 2.0, 1.5])


def test_the_option_turns_off_exactly_highs_sub_mip_heuristics():
    assert highs.highs_options(restarts=False, sub_mips=True) == {"mip_allow_restart": False}
    off = highs.highs_options(restarts=True, sub_mips=False)
    assert off == {"mip_allow_restart": True, "mip_heuristic_run_rins": False, "mip_heuristic_run_rens": False,
                   "mip_heuristic_run_root_reduced_cost": False}


def _recording(monkeypatch):
    """Every MILP's sub_mips, in order, as (inside the restricted seed?, sub_mips)."""
    seen, inside = [], []
    real_solve, real_seed = dinkelbach.solve, dinkelbach._restricted_seed

    def record(model, *args, **kwargs):
        if any(v.integer for v in model.vars):
            seen.append((bool(inside), kwargs.get("sub_mips", True)))
        return real_solve(model, *args, **kwargs)

    def seed(*args, **kwargs):
        inside.append(True)
        try:
            return real_seed(*args, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(dinkelbach, "solve", record)
    monkeypatch.setattr(dinkelbach, "_restricted_seed", seed)
    monkeypatch.setattr(dinkelbach, "RESTRICT_MIN_SHARE", 0.0)  # restrict even where it leaves out little
    return seen


@pytest.fixture(scope="module")
def two_dc():
    return as_problem(load_scenario(Path(__file__).parents[3] / "examples" / "pdd-two-dc.yaml"))


def test_rounds_that_prove_run_without_sub_mips_and_rounds_that_search_with_them(two_dc, monkeypatch):
    """The restricted round must search its pools (sub-MIPs on); the rounds on the whole model from the MILPs'
    own plan mostly prove it (off); a caller's plan is where they still find better ones (on again)."""
    seen = _recording(monkeypatch)
    form = build(two_dc, pdd_architecture(two_dc))
    cold = solve_objective(form, SolveConfig(marginals=False))
    restricted = [sub for r, sub in seen if r]
    whole = [sub for r, sub in seen if not r]
    assert len(restricted) == 2 and whole, f"expected the restricted seed, its round and whole-model rounds: {seen}"
    assert restricted == [True, True]  # its seed MILP keeps HiGHS's defaults, its round searches
    assert whole == [False] * len(whole)
    seen.clear()
    by_name = {v.name: x for v, x in zip(form.model.vars, cold.values)}
    solve_objective(build(two_dc, pdd_architecture(two_dc)), SolveConfig(marginals=False),
                    feasible_start=by_name)
    assert seen and all(sub for _, sub in seen)


def test_a_seed_milp_without_a_plan_keeps_its_sub_mips_on_a_large_model_only(two_dc, monkeypatch):
    """With no plan in hand (no restricted seed: the whole model's seed MILP) the round must find one: on a large
    model HiGHS's sub-MIPs are what finds it, so they stay on there; a small model's seed goes without
    (dinkelbach.SMALL_SEED_SUB_MIPS: rnd-7-19-trace's first plan 17.8 -> 6.3 s); the round after it runs without."""
    seen = _recording(monkeypatch)
    monkeypatch.setattr(dinkelbach, "RESTRICT_MIN_SHARE", 2.0)  # never restrict
    solve_objective(build(two_dc, pdd_architecture(two_dc)), SolveConfig(marginals=False))
    assert [sub for _, sub in seen][:2] == [False, False]
    seen.clear()
    monkeypatch.setattr(dinkelbach, "ROUND_FIRST_INTEGERS", 1)  # as a large model's seed (rounding first aside)
    monkeypatch.setattr(dinkelbach, "_rounded_start", lambda *a, **k: None)
    solve_objective(build(two_dc, pdd_architecture(two_dc)), SolveConfig(marginals=False))
    assert [sub for _, sub in seen][:2] == [True, False]


@pytest.mark.slow
def test_pdd_two_dc_keeps_its_optimum_without_sub_mips(two_dc, monkeypatch):
    """The flagship's ratio with HiGHS's sub-MIP heuristics forced on in every round (as before) and as now."""
    problem = two_dc
    now = solve_objective(build(problem, pdd_architecture(problem)), SolveConfig(marginals=False))
    real = highs.highs_options
    monkeypatch.setattr(highs, "highs_options", lambda restarts, sub_mips: real(restarts, True))
    before = solve_objective(build(problem, pdd_architecture(problem)), SolveConfig(marginals=False))
    assert now.status == before.status == "optimal"
    assert now.ratio == pytest.approx(before.ratio, rel=max(now.mip_gap, before.mip_gap) + 1e-6)


def test_a_small_models_seed_milp_starts_from_the_lp_rounded_at_the_same_optimum(two_dc, monkeypatch):
    """pdd-two-dc's seed MILP (no restricted seed: two sites) is handed the LP rounded as its starting plan
    (where HiGHS's root finds none it branches for one: 0.45 s of the flagship's 0.85 s before the heavy/light
    P split); the ratio is the one found without that start."""
    hints = []
    real_solve = dinkelbach.solve

    def record(model, *args, **kwargs):
        if any(v.integer for v in model.vars):
            hints.append(kwargs.get("hint"))
        return real_solve(model, *args, **kwargs)

    monkeypatch.setattr(dinkelbach, "solve", record)
    now = solve_objective(build(two_dc, pdd_architecture(two_dc)), SolveConfig(marginals=False))
    assert hints and hints[0] is not None  # the seed MILP starts from a plan
    monkeypatch.setattr(dinkelbach, "ROUND_HINT", False)
    hints.clear()
    before = solve_objective(build(two_dc, pdd_architecture(two_dc)), SolveConfig(marginals=False))
    assert hints[0] is None
    assert now.status == before.status == "optimal"
    assert now.ratio == pytest.approx(before.ratio, rel=max(now.mip_gap, before.mip_gap) + 1e-6)
