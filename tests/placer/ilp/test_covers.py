"""The decode cover rows (C18, placer.ilp.covers): every plan keeps them, the MILP's optimum is the one
without them, and the LP relaxation with them is tighter (the proof's root bound)."""

from __future__ import annotations

import pytest

from placer.ilp.backends import solve
from placer.ilp.covers import _rounded, take_covers
from placer.ilp.formulation import build, pdd_architecture
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.ilp.test_columns import CASES as COLUMN_CASES
from tests.placer.sim.conftest import small_pdd_dict

# the relay cases of tests/placer/ilp/test_columns.py and the default small scenario
CASES = {"default": {}, **{name: COLUMN_CASES[name] for name in ("10g-low-hit", "three-dc")}}


def _forms(name: str):
    problem = resolve(parse_scenario(small_pdd_dict(**CASES[name])))
    arch = pdd_architecture(problem)
    plain, covered = build(problem, arch, covers=False), build(problem, arch)
    take_covers(covered)
    return plain, covered


def _f(form, lam: float, relaxed: bool = False):
    """max goodput − λ·cost, proven to 1e-7 (the MILP) or the LP relaxation's."""
    m = form.model.relaxed() if relaxed else form.model
    m.maximize, m.objective = True, dict(form.goodput)
    for i, c in form.cost.items():
        m.objective[i] = m.objective.get(i, 0.0) - lam * c
    res = solve(m, "ortools", 120, mip_gap=1e-9, abs_gap=1e-7)
    assert res.status.value == "optimal"
    return res


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_covers_keep_the_optimum_and_every_optimal_plan(name):
    plain, covered = _forms(name)
    added = covered.model.rows[len(plain.model.rows):]
    assert added and {row.family for row in added} == {"decode_cover"}
    ratio = _ratio(plain)
    for at in (0.9 * ratio, ratio, 1.05 * ratio):
        best = _f(plain, at)
        # the plan without the rows keeps every one of them, and the optimum with them is the same
        assert not [row.name for row in added if row.slack(best.values) < -1e-6 * max(1.0, abs(row.rhs))]
        assert _f(covered, at).objective == pytest.approx(best.objective, rel=1e-6, abs=1e-6)


def _ratio(form) -> float:
    """goodput per USD/h of the MILP's plan at λ = 0 (a ratio near the optimum's scale)."""
    values = _f(form, 0.0).values
    good = sum(c * values[i] for i, c in form.goodput.items())
    return good / sum(c * values[i] for i, c in form.cost.items())


def test_the_covers_tighten_the_relaxation_at_the_optimum():
    """Whole decoders, said once at the root: the LP bound on max goodput − λ·cost drops toward the MILP's."""
    plain, covered = _forms("default")  # 2.344 -> 2.303 req/s at the optimal ratio (the MILP: 0)
    lam = _ratio(plain)
    for _ in range(20):  # Dinkelbach to the optimal ratio of the MILP
        best = _f(plain, lam)
        good = sum(c * best.values[i] for i, c in plain.goodput.items())
        lam_next = good / sum(c * best.values[i] for i, c in plain.cost.items())
        if lam_next <= lam * (1 + 1e-9):
            break
        lam = lam_next
    milp = _f(plain, lam).objective
    lp_plain, lp_covered = _f(plain, lam, True).objective, _f(covered, lam, True).objective
    assert milp <= lp_covered + 1e-6
    assert lp_covered < lp_plain - 1e-3 * max(1.0, abs(lp_plain))


def test_the_rounding_of_a_cover_is_the_mixed_integer_rounding():
    # 1.0 n1 + 1.063 n2 + 0.528 n3 ≥ 1.785 at δ = 1: n1 + 1.080 n2 + 0.673 n3 ≥ 2 (a whole tp32 and a fraction)
    row, rhs = _rounded({1: 1.0, 2: 1.063, 3: 0.528}, 1.785, 1.0)
    assert rhs == 2
    assert row[1] == pytest.approx(1.0) and row[2] == pytest.approx(1.0803, abs=1e-3)
    assert row[3] == pytest.approx(0.6726, abs=1e-3)
    assert _rounded({1: 1.0}, 2.0, 1.0) is None  # a whole right-hand side: nothing to round


def test_what_the_pools_carry_at_most_is_the_same_with_the_covers_in_the_model():
    """A load the inventory cannot carry: the diagnosis' LP (G from 0 up) must not keep the covers' D, the
    decoders for the whole load asked (with them it is infeasible and says the pools carry nothing)."""
    from placer.ilp.diagnose import _max_carry

    plan = small_pdd_dict()
    plan["workload"]["arrival_rps"] = 200.0
    problem = resolve(parse_scenario(plan))
    plain, covered = build(problem, pdd_architecture(problem), covers=False), build(problem, pdd_architecture(problem))
    take_covers(covered)
    assert _max_carry(covered) == pytest.approx(_max_carry(plain), rel=1e-6)
    assert _max_carry(plain) < 100.0

