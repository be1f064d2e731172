"""A plan first, then the proof (issue 47): the rounded LP plan, the time limit, honest status and size."""

import dataclasses
import math
from pathlib import Path

import pytest

from placer.ilp import dinkelbach
from placer.ilp.backends import SolveResult, Status
from placer.ilp.config import Progress, SolveConfig
from placer.ilp.diagnose import two_rates
from placer.ilp.dinkelbach import TARGET_GAP, solve_objective
from placer.errors import InfeasiblePlanError
from placer.ilp.formulation import build, pdd_architecture
from placer.ilp.rounding import rounded_plan
from placer.ilp.starts import _lp_ratio_bound
from placer.optimize import as_problem, optimize
from placer.problem import resolve
from placer.specs import load_scenario, parse_scenario
from placer.validate import validate
from bench.scale_scenarios import scale_scenario
from tests.placer.conftest import micro_dict


@pytest.fixture(scope="module")
def two_dc():
    """pdd-two-dc: its inventory is tight, so rounding every count up breaks a row and the dive repairs it."""
    return as_problem(load_scenario(Path(__file__).parents[3] / "examples" / "pdd-two-dc.yaml"))


def _form(problem):
    return build(problem, pdd_architecture(problem))


def _rounded_plan_of(form, seconds, open_sites=False):
    """The least-cost LP solution and its rounding (None: no plan)."""
    _, _, cheapest = _lp_ratio_bound(form, SolveConfig().started())
    return cheapest, rounded_plan(form.model, list(form.n.values()), form.cost, form.goodput, cheapest, seconds,
                                  {var: (key[1], key[2]) for key, var in form.n.items()}, open_sites)


def _whole_plan(form, values) -> bool:
    """Whether ``values`` is a plan of whole instances that keeps every row of ``form``."""
    return (values is not None and form.model.violations(values) == []
            and all(values[var] == int(values[var]) for var in form.n.values()))


def test_the_rounded_lp_plan_keeps_every_row_with_whole_instances(two_dc):
    form = _form(two_dc)
    _, values = _rounded_plan_of(form, 10.0)
    assert _whole_plan(form, values)


def test_a_dive_whose_lp_fills_its_sites_opens_others_for_whole_instances():
    """10 sites × 4 classes without lines: the least-cost LP fills the sites it uses (dc-001: 6.3 tp16 P beside 0.8 of a
    tp32 MD on 128 chips), so no plan in whole instances keeps to them. Before, the dive kept to them, fixed one
    count a round and returned no plan; now it opens the other sites and the LP rounds to a plan (asked of large
    models only, where the rounding is the first plan: test_fleet_scale, bench_scale's 64 × 12 and 100 × 8)."""
    problem = resolve(parse_scenario(scale_scenario(10, 4, seed=0)))
    local = dataclasses.replace(problem, links={}, line_capacity={})
    form = build(local, pdd_architecture(local), local_decoders=False)
    cheapest, values = _rounded_plan_of(form, 30.0, open_sites=True)
    assert _whole_plan(form, values)
    opened = {key[1] for key, var in form.n.items() if values[var] > 0}
    assert opened - {key[1] for key, var in form.n.items() if cheapest[var] > 1e-6}  # a site the LP left empty


def test_out_of_time_in_every_milp_returns_the_rounded_plan_with_its_gap(two_dc, monkeypatch):
    """Before: the first MILP out of time without a plan was exit 4 (SolveTimeoutError) even though
    the LP's rounding gives a plan in milliseconds; now that plan comes back, "feasible", its gap said."""
    real = dinkelbach.solve

    def milps_find_nothing(model, *args, **kwargs):
        if any(v.integer and v.lb != v.ub for v in model.vars):
            return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, 0.0, "ortools-highs")
        return real(model, *args, **kwargs)

    monkeypatch.setattr(dinkelbach, "solve", milps_find_nothing)
    form = _form(two_dc)
    outcome = solve_objective(form, SolveConfig(time_limit_s=20))
    assert outcome.status == "feasible"
    assert 0 < outcome.mip_gap < math.inf
    assert form.model.violations(outcome.values) == []


def test_status_is_optimal_only_within_the_target_gap(micro_problem, monkeypatch):
    """Before: a Dinkelbach round whose F(λ) was within its absolute gap said "optimal" whatever the
    ratio gap (the issue saw it beside 6.9 %). A ceiling forced far above the plan must say "feasible"."""
    real = dinkelbach._iterate

    def loose(*args, **kwargs):
        state = real(*args, **kwargs)
        state.gap = 0.069
        return state

    monkeypatch.setattr(dinkelbach, "_iterate", loose)
    outcome = solve_objective(_form(micro_problem), SolveConfig())
    assert outcome.mip_gap > TARGET_GAP and outcome.status == "feasible"


def test_the_plan_says_the_model_size_and_the_progress_reaches_the_callback(micro_problem):
    seen: list[Progress] = []
    plan = optimize(micro_problem, SolveConfig(marginals=False, progress=seen.append))
    solver = plan.solver.model_dump()
    assert solver["columns"] > solver["integer_columns"] > 0 and solver["rows"] > 0
    assert plan.solver.status == "optimal" and validate(micro_problem, plan) == []
    assert seen and seen[0].phase == "lp bound" and seen[0].bound is not None
    with_plan = [p for p in seen if p.incumbent is not None]
    assert with_plan and with_plan[-1].incumbent <= with_plan[-1].bound * (1 + 1e-9)
    assert "gap" in with_plan[-1].line()


@pytest.mark.parametrize("asked, most", [(50.2, 50.16), (10.0, 9.99999), (1234.5, 1200.0)])
def test_the_asked_rate_and_the_most_that_meets_the_sla_never_print_alike(asked, most):
    a, b = two_rates(asked, most)
    assert a != b and float(a) == pytest.approx(asked, rel=1e-3) and float(b) == pytest.approx(most, rel=1e-3)


def test_a_load_only_fractions_of_instances_carry_is_blamed_on_whole_instances_not_queueing():
    """One datacenter of 4 H100s and tp 4 only: the LP relaxation serves 1 req/s with fractions of a P and an
    MD instance within the SLA; whole ones need 8 chips. The message said queueing at prefill made requests
    late "at 1 req/s" (rnd-7-38 of the random draws: "at 5.98830000 req/s"); it names the hardware now."""
    data = micro_dict(datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 4}}], links=[],
                      options={"tp_degrees": [4]})
    data["workload"]["arrival_rps"] = 1.0
    with pytest.raises(InfeasiblePlanError) as err:
        optimize(resolve(parse_scenario(data)), SolveConfig(marginals=False, time_limit_s=20))
    message = str(err.value)
    assert "whole instances" in message and "inventory[dc-a,H100-SXM]" in message
    assert "queueing" not in message and "× MD dc-a H100-SXM tp4" in message
