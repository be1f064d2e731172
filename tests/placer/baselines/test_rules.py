"""The baselines say their rules, the ones without meaning in a scenario say so, and the
headline opens with what each side serves within the inventory (issue 45, parts 1 and 2)."""

from __future__ import annotations

import pytest

from placer.baselines import BASELINES, RULES, compare, prfaas_reading, solve_baseline
from placer.errors import InfeasiblePlanError
from placer.optimize import SolveConfig
from placer.plan import Metrics, Plan, PoolOut, Route
from placer.problem import resolve
from placer.report.headline import headline
from placer.report.tables import baseline_rows
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict

FAST = SolveConfig(time_limit_s=5.0, marginals=False)


def one_dc():
    return resolve(parse_scenario(micro_dict(datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 8}}],
                                             links=[])))


def test_cross_datacenter_baselines_are_not_applicable_in_one_datacenter_never_a_free_plan():
    problem = one_dc()
    with pytest.raises(InfeasiblePlanError, match="not applicable: one datacenter"):
        solve_baseline(problem, "cross-dc-pd", FAST)
    result = compare(problem, FAST)
    for name in ("cross-dc-pd", "prfaas"):
        entry = result["baselines"][name]
        assert entry["not_applicable"] is True and entry["error"] == "not applicable: one datacenter", name
        assert name not in result["scaled"]
    rows = {r["name"]: r for r in baseline_rows(result)}
    assert rows["cross-dc-pd"]["not_applicable"] and "cost" not in rows["cross-dc-pd"]  # no $0 row
    assert isinstance(result["baselines"]["same-dc-pd"], Plan)


def test_every_baseline_states_its_rules_and_splitwise_is_hetero_same_dc_pd():
    assert set(RULES) == set(BASELINES) and "prfaas" in BASELINES
    assert all(len(rule.splitlines()) == 1 for rule in RULES.values())
    assert RULES["hetero-same-dc-pd"].startswith("Splitwise:")
    problem = resolve(parse_scenario(micro_dict()))
    plan = solve_baseline(problem, "splitwise", FAST)
    info = plan.model_extra["baseline"]
    assert info["name"] == "hetero-same-dc-pd" and info["rules"] == RULES["hetero-same-dc-pd"]
    with pytest.raises(ValueError, match="unknown baseline 'nope'"):
        solve_baseline(problem, "nope", FAST)


def _plan(bcr: float, served: float, offered: float = 10.0, baseline: dict | None = None, routes=()) -> Plan:
    extra = {"baseline": baseline} if baseline else {}
    return Plan(scenario="s", pools=[PoolOut(role="P", datacenter="dc-a", chip="Ascend-910B", tp=16, count=1)],
                routes=list(routes),
                metrics=Metrics(bcr_requests_per_usd=bcr, cost_usd_per_h=10, goodput_rps=0.95 * served,
                                served_rps=served, offered_rps=offered, sla_attainment=0.95), **extra)


def test_the_headline_opens_with_what_each_side_serves_within_the_inventory_then_what_scaling_bought():
    """The flagship's shape: PDD carries the whole load in the inventory; same-dc-pd carries half of it
    and beats PDD at equal load only with 64 chips its datacenter does not have."""
    same = _plan(202.7, 4.96, baseline={"max_within_inventory_rps": 5.3})
    scaled = _plan(211.4, 10.0, baseline={
        "scaled": "scaled to carry the offered 10 req/s: it took 160 Ascend-910B in dc-a (inventory 96) (...)",
        "beyond_inventory": [{"datacenter": "dc-a", "chip": "Ascend-910B", "chips": 64, "inventory": 96,
                              "usd_per_h": 64.0}], "beyond_inventory_usd_per_h": 64.0})
    comparison = {"pdd": _plan(187.3, 10.0), "baselines": {"same-dc-pd": same}, "scaled": {"same-dc-pd": scaled}}
    first, second, *_ = headline(comparison).splitlines()
    assert first == ("within the inventory: PDD serves 10.00 / 10 req/s at BCR 187.3; same-dc-pd serves "
                     "4.96 / 10 req/s at BCR 202.7 (at most 5.30 req/s within the SLA, at a lower BCR)")
    assert second.startswith("at equal load (10 req/s): BCR -11.4 % against same-dc-pd, scaled, only by buying "
                             "64 Ascend-910B beyond dc-a's 96 (+64.00 USD/h at catalog prices)")
    # a baseline carrying the whole load within the inventory is compared first, as such
    comparison["baselines"]["agg"] = _plan(181.4, 10.0)
    second = headline(comparison).splitlines()[1]
    assert second.startswith("at equal load (10 req/s): BCR +3.3 % against agg, both within the inventory; "
                             "BCR -11.4 % against same-dc-pd, scaled, only by buying")


def test_prfaas_reads_the_threshold_its_plan_implies():
    problem = resolve(parse_scenario(micro_dict()))  # hot 819, cold 11,469, odd 14,746 uncached tokens
    routes = [Route(request_class="hot", pipeline="P-MD", src="dc-b", dst="dc-b", rps=4.8),
              Route(request_class="cold", pipeline="P-MD", src="dc-a", dst="dc-b", rps=0.45),
              Route(request_class="cold", pipeline="P-MD", src="dc-b", dst="dc-b", rps=0.45),
              Route(request_class="odd", pipeline="P-MD", src="dc-a", dst="dc-b", rps=0.3)]
    plan = _plan(100, 6.0, 6.0, routes=routes).model_copy(update={"pools": [
        PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=1, count=1),
        PoolOut(role="MD", datacenter="dc-b", chip="L40S", tp=1, count=2)]})
    reading = prfaas_reading(problem, plan)
    assert reading["local"] == "dc-b" and reading["threshold_uncached_tokens"] == 11469
    assert reading["threshold"] == ("prompts with 11,469 or more uncached tokens prefilled remotely "
                                    "(2 of 3 classes; cold 50 % remote), the rest in dc-b")
    flipped = plan.model_copy(update={"routes": [r.model_copy(update={"src": "dc-a" if r.request_class == "hot"
                                                                      else "dc-b"}) for r in routes]})
    assert prfaas_reading(problem, flipped)["threshold"].startswith("not a single threshold: odd (14,746")
