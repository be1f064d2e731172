"""A plan of a large problem by regions (issue 47, part 3): connected regions, each solved whole, joined into a
plan of the whole model."""

import dataclasses
import time

import pytest

from bench.scale_scenarios import scale_scenario
from placer.ilp import local_first, regions
from placer.ilp.config import SolveConfig
from placer.ilp.dinkelbach import Outcome, solve_objective
from placer.ilp.formulation import build, pdd_architecture
from placer.ilp.plan_names import on_columns, per_flow
from placer.ilp.starts import _goodput, _cost, _lp_ratio_bound, _rounded_start
from placer.optimize import extract, optimize
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.validate import validate


@pytest.fixture(scope="module")
def six_sites():
    return resolve(parse_scenario(scale_scenario(6, 4, seed=0)))


@pytest.fixture(scope="module")
def joined(six_sites):
    """The six sites in two regions of three, each at the load the local model's LP gives it; beside it the
    local plan (that LP rounded) and the whole model."""
    problem, arch = six_sites, pdd_architecture(six_sites)
    config = SolveConfig(time_limit_s=120, marginals=False).started()
    local = build(dataclasses.replace(problem, links={}, line_capacity={}), arch, "bcr")
    _, _, cheapest = _lp_ratio_bound(local, config)
    first = _rounded_start(local, config, cheapest, None, time.perf_counter(), share=1.0)
    saved = regions.REGION_SITES
    regions.REGION_SITES = 3
    try:
        plan = regions.regional_plan(problem, arch, config, local, cheapest, workers=1)
    finally:
        regions.REGION_SITES = saved
    return plan, first.lam, build(problem, arch, "bcr")


def test_regions_are_connected_and_hold_every_site_once():
    problem = resolve(parse_scenario(scale_scenario(100, 2, seed=0)))
    found = regions.split(problem)
    sites = [s for r in found for s in r]
    assert sorted(sites) == sorted(problem.dc_names)
    assert all(regions.REGION_SITES / 2 <= len(r) <= 2 * regions.REGION_SITES for r in found)
    for region in found:  # connected over its own lines
        reached, todo = {region[0]}, [region[0]]
        while todo:
            here = todo.pop()
            for src, dst in problem.links:
                if src == here and dst in region and dst not in reached:
                    reached.add(dst)
                    todo.append(dst)
        assert reached == set(region)


def test_the_joined_plan_is_a_plan_of_the_whole_model(six_sites, joined):
    """Each region's relayed flows may be split at RLD where the whole model's are not (or the reverse): the
    joined plan, given per flow, lands on the whole model's columns and breaks none of its rows."""
    plan, local_ratio, whole = joined
    assert plan is not None and len(plan.regions) == 2
    values = [on_columns(whole, plan.by_name).get(v.name, 0.0) for v in whole.model.vars]
    assert whole.model.violations(values) == []
    ratio = _goodput(whole, values) / _cost(whole, values)
    assert ratio == pytest.approx(plan.ratio, rel=1e-9)
    assert ratio > local_ratio  # the regions, each solved whole, beat the rounded local plan
    out = extract(whole, Outcome(values, "feasible", 0.0, 0.0, "regions", 0, ratio), "bcr")
    assert validate(six_sites, out) == []
    assert sum(plan.arrival) == pytest.approx(six_sites.arrival_rps)


def test_a_plan_per_flow_comes_back_on_the_same_columns(joined):
    _, _, whole = joined
    values = [on_columns(whole, joined[0].by_name).get(v.name, 0.0) for v in whole.model.vars]
    again = on_columns(whole, per_flow(whole, values))
    assert [again.get(v.name, 0.0) for v in whole.model.vars] == pytest.approx(values, abs=1e-9)


@pytest.mark.slow
def test_the_joined_plan_is_no_better_than_the_whole_optimum(joined):
    plan, _, whole = joined
    best = solve_objective(whole, SolveConfig(time_limit_s=300, marginals=False))
    assert plan.ratio <= best.ratio * (1 + best.mip_gap + 1e-9)


@pytest.mark.slow
def test_a_large_problem_starts_the_whole_model_from_its_best_plan(six_sites, monkeypatch):
    """The local plan (its Dinkelbach) and the regions' joined plan: the whole model starts from the better."""
    monkeypatch.setattr(local_first, "LOCAL_FIRST_SITE_CLASSES", 1)
    monkeypatch.setattr(regions, "REGION_SITES", 3)
    monkeypatch.setattr(regions, "REGION_MIN_S", 0.0)
    ran = []
    solve_regions = regions.regional_plan
    monkeypatch.setattr(regions, "regional_plan", lambda *a, **k: ran.append(solve_regions(*a, **k)) or ran[-1])
    seen = []
    plan = optimize(six_sites, SolveConfig(time_limit_s=120, marginals=False, progress=seen.append))
    assert ran and ran[0] is not None
    found = [p.incumbent for p in seen if p.phase in ("first plan", "local milp", "regions")]
    started = next(p.incumbent for p in seen if p.phase == "lp bound")
    assert started == pytest.approx(max(found), rel=1e-9)
    assert all(p.incumbent >= started * (1 - 1e-9) for p in seen if p.phase == "milp")
    assert validate(six_sites, plan) == []
