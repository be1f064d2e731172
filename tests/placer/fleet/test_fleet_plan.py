"""Two models planned jointly on one set of datacenters, chips and WAN line (issue 17, part 4).

Each shared capacity is constructed to bind only jointly, and the test checks the construction
first: planned one at a time on the same hardware, each model fits the limit and the two
together exceed it (examples/fleet-two-models.yaml's line; the H20 inventory set between the
larger model's own use and the sum of both).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from placer.errors import InfeasiblePlanError
from placer.optimize import SolveConfig, evaluate_plan, optimize
from placer.problem import resolve_fleet
from placer.specs import parse_scenario
from placer.validate import validate_fleet

CONFIG = SolveConfig(time_limit_s=60, marginals=False)
LINE = ("dc-a", "dc-b")


def _alone(scenario) -> dict:
    """Each model's plan with the hardware to itself."""
    return {m.name: optimize(scenario.member(i), CONFIG) for i, m in enumerate(scenario.models)}


def _line_used(plan, line=LINE) -> float:
    return next(u.gbit_per_s_used for u in plan.links if (u.src, u.dst) == line)


def _chips(plan) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = defaultdict(int)
    for p in plan.pools:
        used[(p.datacenter, p.chip)] += p.count * p.tp
    return used


def test_a_line_each_model_fits_alone_is_shared_when_both_need_more_than_it_carries(fleet_data):
    # the line between what the bigger model alone sends and what both send, set from the plans themselves so the
    # construction holds whatever the physics moves (at 50 Gbit/s both fitted once decode memory was planned per
    # class: the example's line is 25 now), then each model's plan on that line
    cap = parse_scenario(fleet_data).options.link_utilization_cap
    wide = [_line_used(plan) for plan in _alone(parse_scenario(fleet_data)).values()]
    fleet_data["links"][0]["gbit_per_s"] = round((max(wide) + sum(wide)) / 2 / cap, 3)
    scenario = parse_scenario(fleet_data)
    limit = cap * fleet_data["links"][0]["gbit_per_s"]
    alone = {name: _line_used(plan) for name, plan in _alone(scenario).items()}
    # the construction: on this very line each model alone fits, both together do not
    assert max(alone.values()) <= limit * (1 + 1e-4) < sum(alone.values()), alone

    plan = optimize(scenario, CONFIG)
    fleet = resolve_fleet(scenario)
    assert validate_fleet(fleet, plan) == []
    total = _line_used(plan)
    per_model = {name: m.wan_gbit_per_s for name, m in plan.models.items()}
    assert total <= limit * (1 + 1e-4)
    assert sum(per_model.values()) == pytest.approx(total, rel=1e-4)
    assert all(used > 0 for used in per_model.values())  # both models still use the line: they share it
    # every row of the plan belongs to one of the two models, and each still carries its whole load
    assert {p.model for p in plan.pools} == {r.model for r in plan.routes} == {"chat", "code"}
    for name, m in plan.models.items():
        assert m.served_rps == pytest.approx(fleet.member(name).arrival_rps, rel=1e-3)


def test_the_shared_inventory_holds_both_models_pools(fleet_data):
    roomy = parse_scenario(fleet_data)
    alone = [_chips(plan)[("dc-b", "H20")] for plan in _alone(roomy).values()]
    assert min(alone) > 0
    h20 = max(alone) + (sum(alone) - max(alone)) // 2  # each model's own H20 fit; both do not
    assert max(alone) <= h20 < sum(alone)
    fleet_data["datacenters"][1]["inventory"]["H20"] = h20
    scenario = parse_scenario(fleet_data)
    plan = optimize(scenario, CONFIG)
    assert _chips(plan)[("dc-b", "H20")] <= h20
    assert validate_fleet(resolve_fleet(scenario), plan) == []


def test_bcr_is_reported_per_model_and_for_the_fleet(fleet_data):
    plan = optimize(parse_scenario(fleet_data), CONFIG)
    models = plan.models
    assert set(models) == {"chat", "code"}
    cost = sum(m.cost_usd_per_h for m in models.values())
    goodput = sum(m.goodput_rps for m in models.values())
    assert plan.metrics.cost_usd_per_h == pytest.approx(cost)
    assert plan.metrics.bcr_requests_per_usd == pytest.approx(goodput * 3600 / cost)
    # the fleet's ratio of sums lies between the models' own ratios
    bcrs = [m.bcr_requests_per_usd for m in models.values()]
    assert min(bcrs) <= plan.metrics.bcr_requests_per_usd <= max(bcrs)
    # each model's metrics are its own pools' cost
    for name, m in models.items():
        own = [p for p in plan.pools if p.model == name]
        assert own and m.cost_usd_per_h > 0


def test_evaluate_accepts_the_fleet_plan_and_rejects_one_that_overfills_the_shared_inventory(fleet_data):
    scenario = parse_scenario(fleet_data)
    plan = optimize(scenario, CONFIG)
    again = evaluate_plan(scenario, plan, CONFIG)
    assert again.metrics.bcr_requests_per_usd == pytest.approx(plan.metrics.bcr_requests_per_usd, rel=1e-3)
    assert set(again.models) == {"chat", "code"}
    # the same plan where dc-b holds each model's H20s but not both models' together
    own = [sum(p.count * p.tp for p in plan.pools if p.model == name and p.chip == "H20") for name in plan.models]
    assert min(own) > 0
    fleet_data["datacenters"][1]["inventory"]["H20"] = sum(own) - 1
    with pytest.raises(InfeasiblePlanError, match=r"together exceed.*inventory dc-b H20"):
        evaluate_plan(parse_scenario(fleet_data), plan, CONFIG)


def test_validate_sums_every_models_use_of_a_shared_line(fleet_data):
    scenario = parse_scenario(fleet_data)
    plan = optimize(scenario, CONFIG)
    used = {name: m.wan_gbit_per_s for name, m in plan.models.items()}
    assert min(used.values()) > 0
    # a line that carries either model's KV but not both
    fleet_data["links"][0]["gbit_per_s"] = (max(used.values()) + sum(used.values())) / 2 \
        / scenario.options.link_utilization_cap
    issues = validate_fleet(resolve_fleet(parse_scenario(fleet_data)), plan)
    assert [i for i in issues if i.startswith("fleet: link dc-a->dc-b")], issues
    assert not [i for i in issues if "link" in i and not i.startswith("fleet:")], issues


def test_a_binding_shared_row_is_priced_for_the_whole_fleet(fleet_data):
    fleet_data["datacenters"][1]["inventory"]["H20"] = 16  # fewer H20s than the two models would take
    plan = optimize(parse_scenario(fleet_data), SolveConfig(time_limit_s=120))
    (row,) = [b for b in plan.binding if b.constraint == "inventory[dc-b,H20]"]
    assert "H20 chip" in row.marginal and "fleet BCR" in row.marginal
    # one more chip never makes the fleet's optimum worse
    assert row.delta_bcr_requests_per_usd >= -1e-3 * plan.metrics.bcr_requests_per_usd


def test_a_fleet_plan_without_routes_is_routed_jointly_within_the_shared_line(fleet_data):
    scenario = parse_scenario(fleet_data)
    plan = optimize(scenario, CONFIG)
    bare = plan.model_copy(update={"routes": [], "assignments": []})
    again = evaluate_plan(scenario, bare, CONFIG)
    limit = scenario.options.link_utilization_cap * fleet_data["links"][0]["gbit_per_s"]
    assert _line_used(again) <= limit * (1 + 1e-4)
    assert validate_fleet(resolve_fleet(scenario), again) == []
    # the same pools carry at least the goodput the optimizer planned for them
    assert again.metrics.goodput_rps >= plan.metrics.goodput_rps * (1 - 1e-3)


def test_a_fleet_of_one_model_plans_as_that_models_own_scenario(fleet_data):
    fleet_data["models"] = fleet_data["models"][:1]
    scenario = parse_scenario(fleet_data)
    single = optimize(scenario.member(0), CONFIG)
    fleet = optimize(scenario, CONFIG)
    bcr = single.metrics.bcr_requests_per_usd
    assert fleet.metrics.bcr_requests_per_usd == pytest.approx(bcr, rel=5e-3)  # Dinkelbach's precision
    assert fleet.models["chat"].bcr_requests_per_usd == pytest.approx(bcr, rel=5e-3)


def test_no_fleet_plan_names_the_model_that_has_none_alone(fleet_data):
    fleet_data["models"][1]["sla"]["ttft_p90_s"] = 0.01  # code cannot prefill a prompt this fast anywhere
    with pytest.raises(InfeasiblePlanError, match=r"^infeasible: model code: the TTFT SLA"):
        optimize(parse_scenario(fleet_data), CONFIG)


def test_no_fleet_plan_when_each_model_fits_alone_names_the_shared_hardware(fleet_data):
    fleet_data["datacenters"] = fleet_data["datacenters"][:1]  # one datacenter, one kind of chip
    fleet_data["links"] = []
    roomy = parse_scenario(fleet_data)
    cheapest = SolveConfig(objective="min-cost", time_limit_s=60, marginals=False)
    least = [sum(p.count * p.tp for p in optimize(roomy.member(i), cheapest).pools) for i in range(2)]
    chips = max(least) + (sum(least) - max(least)) // 2  # either model's least, not both models'
    assert max(least) <= chips < sum(least), least
    fleet_data["datacenters"][0]["inventory"]["H800-SXM"] = chips
    scenario = parse_scenario(fleet_data)
    for i in range(2):  # the construction: each model alone still has a plan
        assert optimize(scenario.member(i), cheapest).metrics.served_rps > 0
    with pytest.raises(InfeasiblePlanError, match="every model has a plan with the hardware to itself, but not all"):
        optimize(scenario, CONFIG)
