"""The Lagrangian bound with every site's counts whole (issue 47, placer.ilp.lagrange): for every λ it lies between the
best plan's goodput − λ·cost (the MILP's optimum, proven exactly) and the LP relaxation's bound, and where a site's
decoders must be bought whole it is strictly below the LP's."""

import pytest

from placer.ilp import lagrange
from placer.ilp.backends import solve
from placer.ilp.formulation import build, pdd_architecture
from placer.specs import parse_scenario
from placer.problem import resolve
from tests.placer.ilp.test_ilp import _random_micro


def _objective(form, lam: float) -> dict[int, float]:
    out = dict(form.goodput)
    for i, c in form.cost.items():
        out[i] = out.get(i, 0.0) - lam * c
    return out


def _best(form, objective: dict[int, float]):
    """F(λ) proven exactly: the MILP with its covers, to a zero gap."""
    m = form.model
    held = {id(r) for r in m.rows}
    m.rows.extend(r for r in form.covers if id(r) not in held)
    m.maximize, m.objective = True, dict(objective)
    res = solve(m, "ortools", 60, mip_gap=1e-9, abs_gap=1e-9)
    assert res.status.value == "optimal"
    return res


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("share", [0.5, 1.0, 1.5])
def test_the_bound_lies_between_the_optimum_and_the_lp(seed, share):
    problem = _random_micro(seed)
    form = build(problem, pdd_architecture(problem))
    lp = form.model.relaxed()
    lp.maximize, lp.objective = False, dict(form.cost)
    least = solve(lp, "ortools", 30)
    if not least.status.has_solution:
        pytest.skip("no plan: nothing to bound")
    lam = share * problem.arrival_rps / least.objective  # below, near and above the LP's ratio bound
    objective = _objective(form, lam)
    best = _best(form, objective)
    bound = lagrange.site_bound(form, objective, 60, plan=best.values)
    assert bound is not None
    assert best.objective - 1e-6 <= bound.value <= bound.lp + 1e-6


def test_relaxed_blocks_give_the_lp_bound():
    """With the blocks as LPs, L at the LP's duals is the LP bound: the rows dualised and the multipliers' signs are
    right (a wrong sign or a row lost would move it)."""
    problem = _random_micro(1)
    form = build(problem, pdd_architecture(problem))
    objective = _objective(form, 0.5 * problem.arrival_rps / 10.0)
    bound = lagrange.site_bound(form, objective, 60, steps=0, relax=True)
    assert bound.value == pytest.approx(bound.lp, rel=1e-6, abs=1e-6)


def test_whole_decoders_cut_the_lp_bound():
    """Four generated sites, three classes (bench/scale_scenarios): the LP buys decoders in fractions where its P fills
    a site's chips; with each site's counts whole the bound is lower, and still above the best plan's F(λ)."""
    from bench.scale_scenarios import scale_scenario

    problem = resolve(parse_scenario(scale_scenario(4, 3, seed=1)))
    form = build(problem, pdd_architecture(problem))
    lp = form.model.relaxed()
    lp.maximize, lp.objective = False, dict(form.cost)
    least = solve(lp, "ortools", 30)
    objective = _objective(form, 0.9 * problem.arrival_rps / least.objective)
    best = _best(form, objective)
    bound = lagrange.site_bound(form, objective, 120, plan=best.values)
    assert best.objective - 1e-6 <= bound.value < bound.lp - 1e-3


def test_the_bound_beside_a_proof_caps_the_ratio_above_the_optimum(monkeypatch):
    """The sites' bound run beside a proving MILP (a forked child, :class:`lagrange.Beside`) sends a ceiling on the
    ratio that the optimum a full solve proves does not pass, and that is below the LP's at that λ (eight generated
    sites, three classes: the sites' bound 0.90 against the LP's 1.76 req/s); a solve with it on keeps its optimum."""
    from bench.scale_scenarios import scale_scenario
    from placer.ilp import dinkelbach
    from placer.ilp.config import SolveConfig
    from placer.ilp.starts import _ceiling, _goodput_floor

    problem = resolve(parse_scenario(scale_scenario(8, 3, seed=2)))
    ref = dinkelbach.solve_objective(build(problem, pdd_architecture(problem)), SolveConfig(time_limit_s=60))
    form = build(problem, pdd_architecture(problem))
    lam = ref.ratio * 0.98
    floor = _goodput_floor(form)
    config = SolveConfig(time_limit_s=60).started()
    ceiling = lagrange.Beside(form, config, lam, ref.values, 0.0, floor, 0.0).ceiling(wait_s=60)
    lp = lagrange.site_bound(form, _objective(form, lam), 60, steps=0)
    assert ref.ratio * (1 - 1e-9) <= ceiling < _ceiling(lam, lp.lp, 0.0, floor)
    monkeypatch.setattr(dinkelbach, "SITES_BOUND", True)
    out = dinkelbach.solve_objective(build(problem, pdd_architecture(problem)), SolveConfig(time_limit_s=60))
    assert out.ratio == pytest.approx(ref.ratio, rel=max(ref.mip_gap, out.mip_gap))
