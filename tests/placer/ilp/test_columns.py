"""Relayed flows split at RLD and implied rows left out (placer.ilp.columns): a smaller model with
the same optimum, and plans whose per-line flows keep every row of the per-line model."""

from __future__ import annotations

import pytest

from placer.pdd import P_RLD_MD
from placer.ilp.backends import solve
from placer.ilp.columns import implied
from placer.ilp.dinkelbach import solve_objective
from placer.ilp.formulation import build, pdd_architecture
from placer.optimize import SolveConfig
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict

# the relay-heavy cases of tests/placer/sim/test_relay_agreement.py, in short
LOW_HIT = [
    {"name": "hot", "share": 0.5, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.97},
    {"name": "low", "share": 0.4, "input_tokens": 16384, "output_tokens": 512, "hit_rate": 0.8},
    {"name": "odd", "share": 0.1, "input_tokens": 16384, "output_tokens": 128, "hit_rate": 0.1},
]
LINE_5G = [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 5, "rtt_ms": 30, "jitter_ms": 3}]
CASES = {
    "10g-low-hit": dict(workload={"arrival_rps": 24.0, "classes": LOW_HIT}),
    "5g": dict(links=LINE_5G),
    # three datacenters: a relayed request from dc-a has two lines to choose from
    "three-dc": dict(
        datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 16}}, {"name": "dc-b", "inventory": {"H20": 32}},
                     {"name": "dc-c", "inventory": {"H20": 16}}],
        links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10, "rtt_ms": 30},
               {"src": "dc-a", "dst": "dc-c", "gbit_per_s": 10, "rtt_ms": 40}],
        workload={"arrival_rps": 24.0, "classes": LOW_HIT}),
}


def _problem(name: str):
    return resolve(parse_scenario(small_pdd_dict(**CASES[name])))


def _lp(form, lam: float) -> float:
    """max goodput − λ·cost over the LP relaxation."""
    m = form.model.relaxed()
    m.maximize, m.objective = True, dict(form.goodput)
    for i, c in form.cost.items():
        m.objective[i] = m.objective.get(i, 0.0) - lam * c
    res = solve(m, "ortools", 60)
    assert res.status.has_solution
    return res.objective


def test_implied_compares_each_column_against_its_limit():
    assert implied({0: 1.0, 1: 2.0}, 10.0, {0: 1.0, 1: 2.0}, 10.0)  # the same row
    assert implied({0: 1.0}, 20.0, {0: 1.0}, 10.0)  # a looser limit
    assert not implied({0: 1.0, 1: 3.0}, 10.0, {0: 1.0, 1: 2.0}, 10.0)  # one column weighs more
    assert not implied({0: 1.0, 2: 0.1}, 10.0, {0: 1.0}, 10.0)  # a column the other row lacks


def test_a_relayed_request_with_one_line_keeps_a_column_per_line():
    problem = _problem("10g-low-hit")
    form = build(problem, pdd_architecture(problem))
    assert not form.columns.relay_in and any(f.pipeline == P_RLD_MD for f in form.x)
    assert len(form.model.vars) == len(build(problem, pdd_architecture(problem), split_relays=False).model.vars)


def test_memory_rows_stay_where_they_can_bind():
    """(C4) is left out only where (C3) implies it: over a 5 Gbit/s line a P-MD request's KV stays
    staged on P long enough that memory, not prefill time, may bind first."""
    problem = _problem("5g")
    form = build(problem, pdd_architecture(problem))
    kept = [r for r in form.model.rows if r.family == "p_memory"]
    assert kept and len(kept) < sum(1 for r in form.model.rows if r.family == "p_capacity")
    assert all(any(f.crosses for f, i in form.x.items() if i in r.coeffs) for r in kept)


@pytest.mark.parametrize("name", ["three-dc"])
def test_split_model_is_smaller_with_the_same_lp_optimum(name):
    problem = _problem(name)
    split = build(problem, pdd_architecture(problem))
    whole = build(problem, pdd_architecture(problem), split_relays=False)
    assert split.columns.relay_in, "two lines out of dc-a: relayed flows are split at RLD"
    assert len(split.model.vars) < len(whole.model.vars)
    assert not any(f.pipeline == P_RLD_MD and f.p.role == "P" and (f.k, f.p) in split.columns.relay_in
                   for f in split.x)
    for lam in (0.0, 0.5 * _lp(whole, 0.0) / max(whole.cost.values())):
        assert _lp(split, lam) == pytest.approx(_lp(whole, lam), rel=1e-7, abs=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_split_plan_keeps_every_row_of_the_per_line_model(name):
    """The split solution's per-line rates (r shared out over the lines in y's proportions), with
    the same counts, tiers and decode splits, break no row of the model with a column per line."""
    problem = _problem(name)
    split = build(problem, pdd_architecture(problem))
    whole = build(problem, pdd_architecture(problem), split_relays=False)
    out = solve_objective(split, SolveConfig(marginals=False))
    rates = split.rates(out.values)
    relayed = {f: r for f, r in rates.items() if f.pipeline == P_RLD_MD and r > 1e-9}
    named = {v.name: out.values[i] for i, v in enumerate(split.model.vars)}
    values = [named.get(v.name, 0.0) for v in whole.model.vars]
    for f, i in whole.x.items():
        values[i] = rates.get(f, 0.0)
    # a rate on a flow `prepare` dropped as dominated has no column there: none should carry load here
    assert all(f in whole.x for f in relayed)
    assert whole.model.violations(values, tol=1e-6) == []
    good = sum(c * values[i] for i, c in whole.goodput.items())
    assert good == pytest.approx(sum(c * out.values[i] for i, c in split.goodput.items()), rel=1e-9)


@pytest.mark.parametrize("name", ["three-dc"])
def test_split_and_per_line_models_reach_the_same_ratio(name):
    problem = _problem(name)
    a = solve_objective(build(problem, pdd_architecture(problem)), SolveConfig(marginals=False))
    b = solve_objective(build(problem, pdd_architecture(problem), split_relays=False), SolveConfig(marginals=False))
    assert a.ratio == pytest.approx(b.ratio, rel=max(a.mip_gap, b.mip_gap, 1e-6))
