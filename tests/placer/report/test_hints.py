"""A hint when a baseline beats the plan (issue 44, stumble 4): `compare` showed aggregated
serving ahead with no word that ``options.aggregated`` exists."""

from __future__ import annotations

from placer.plan import Metrics, Plan, PoolOut, SolverInfo
from placer.report.headline import headline, hints


def _plan(bcr: float, served_rps: float = 4.0, role: str = "P", baseline: dict | None = None) -> Plan:
    extra = {"baseline": baseline} if baseline else {}
    return Plan(scenario="s", pools=[PoolOut(role=role, datacenter="a", chip="H100-SXM", tp=1, count=1)],
                metrics=Metrics(bcr_requests_per_usd=bcr, cost_usd_per_h=10, goodput_rps=bcr * 10 / 3600,
                                served_rps=served_rps, offered_rps=4.0), **extra)


def test_aggregated_serving_ahead_names_the_option_that_lets_the_planner_use_it():
    comparison = {"pdd": _plan(1000), "baselines": {"same-dc-pd": _plan(900), "agg": _plan(1040)}}
    [hint] = hints(comparison)
    assert hint.startswith("agg beats this plan by 4 % BCR") and "options.aggregated: true" in hint
    assert "docs/scenario.md" in hint
    assert headline(comparison).splitlines()[2] == f"hint: {hint}"  # after the inventory and equal-load lines


def test_no_hint_when_the_plan_leads_or_already_uses_aggregated_pools_the_gap_is_named():
    assert hints({"pdd": _plan(1000), "baselines": {"agg": _plan(990)}}) == []
    pdd = _plan(1000, role="A")
    [hint] = hints({"pdd": pdd, "baselines": {"agg": _plan(1100)}})
    assert "aggregated: true" not in hint and "--time-limit" in hint


def test_a_baseline_ahead_at_a_smaller_load_or_with_more_chips_says_so():
    smaller = _plan(1200, served_rps=3.0)
    scaled = _plan(1100, baseline={"scaled": "scaled to carry the offered 4 req/s: it took 8 H100-SXM in a "
                                             "(inventory 4) (chips priced as the catalog; inventory unbounded)"})
    out = hints({"pdd": _plan(1000), "baselines": {"same-dc-pd": smaller}, "scaled": {"same-dc-pd": scaled}})
    assert out == ["same-dc-pd, scaled beats this plan by 10 % BCR, with more chips than the inventory "
                   "(8 H100-SXM in a (inventory 4)): buying them would raise the BCR"]
    [alone] = hints({"pdd": _plan(1000), "baselines": {"same-dc-pd": smaller}})
    assert "at a smaller load (3.00 of 4 req/s)" in alone and "options.min_served_fraction" in alone


def test_a_baseline_ahead_of_a_proven_optimum_is_outside_pdds_rules_not_a_time_limit():
    """PDD solved to optimality and a baseline still leads beyond the gap (issue 45: prfaas's enforced
    threshold on the flagship): more solver time cannot help, and the hint must not ask for it."""
    pdd = _plan(1000).model_copy(update={"solver": SolverInfo(backend="ortools-highs", status="optimal", mip_gap=0.004)})
    [hint] = hints({"pdd": pdd, "baselines": {"prfaas": _plan(1380)}})
    assert hint.startswith("prfaas beats this plan by 38 % BCR beyond the PDD solve's proven 0.4 % gap")
    assert "outside PDD's rules" in hint and "threshold" in hint and "--time-limit" not in hint
    [within] = hints({"pdd": pdd, "baselines": {"prfaas": _plan(1008)}})  # inside gap + margin: the solve's gap
    assert "--time-limit" in within
