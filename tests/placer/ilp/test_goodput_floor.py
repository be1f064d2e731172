"""The proof's ceiling from the least goodput any plan has (issue 47): a plan at ratio r costs at least floor / r, so a
round's bound B on goodput − λ·cost caps every ratio at λ / (1 − B/floor) — tighter than λ + B/least_cost wherever the
LP's least cost is loose (16 sites × 12 classes: floor 108 req/s against λ·least_cost 102.5)."""

import dataclasses

import pytest

from placer.ilp.backends import solve
from placer.ilp.formulation import build, pdd_architecture
from placer.ilp.starts import _ceiling, _goodput_floor
from tests.placer.ilp.test_ilp import _random_micro


def _least_goodput(form) -> float:
    """The least goodput over the LP relaxation: at most any plan's."""
    m = form.model.relaxed()
    m.maximize, m.objective = False, dict(form.goodput)
    res = solve(m, "ortools", 30)
    assert res.status.has_solution
    return res.objective


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_plan_has_less_goodput_than_the_floor(seed):
    """The floor is read off the rows every plan keeps: the relaxation's least goodput (below every plan's) is at
    least it, and it is the SLA's share of the load the plan must serve (not 0: the proof gains from it)."""
    problem = _random_micro(seed)
    form = build(problem, pdd_architecture(problem))
    floor = _goodput_floor(form)
    assert floor == pytest.approx(0.9 * problem.options.min_served_fraction * problem.arrival_rps, rel=1e-6)
    assert _least_goodput(form) >= floor - 1e-6


def test_a_model_without_the_sla_row_has_no_floor():
    problem = _random_micro(0)
    arch = pdd_architecture(problem)
    form = build(problem, dataclasses.replace(arch, enforce_sla=False))
    assert _goodput_floor(form) == 0.0


def test_the_ceiling_takes_the_floor_where_it_is_the_tighter():
    """16 × 12's last proving round in figures (λ = 283.56 req/USD, least cost 1,300.8 USD/h, floor 108 req/s): a bound
    of 0.92 req/s certified 0.90 % with the least cost alone, 0.86 % with the floor; a loose bound (9.78) keeps the
    least cost's 9.5 % (the floor's 10.0 % is the looser there)."""
    lam, least, floor = 283.56 / 3600, 1300.8, 108.0
    assert _ceiling(lam, 0.92, least, floor) / lam - 1 == pytest.approx(0.92 / 108 / (1 - 0.92 / 108), rel=1e-9)
    assert _ceiling(lam, 0.92, least, floor) < lam + 0.92 / least
    assert _ceiling(lam, 9.78, least, floor) == pytest.approx(lam + 9.78 / least)
    assert _ceiling(lam, -1.0, least, floor) == lam  # a proven F(λ) ≤ 0: λ is the optimum
    assert _ceiling(lam, 1.0, 0.0, 0.0) == float("inf")
