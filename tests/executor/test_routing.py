"""Routing rules and the router's prefix index (pure policy: no torch, no sockets)."""

from __future__ import annotations

import pytest

from executor.routing import NoRouteError, Pipeline, PrefixIndex, RoutingPolicy
from placer.pdd import FilterRule
from placer.plan import Plan
from placer.specs import parse_scenario

ALL = frozenset(Pipeline) - {Pipeline.P_D, Pipeline.P_A}  # the PDD pipelines


def test_filter_then_hit_rate_decide_the_pipeline():
    policy = RoutingPolicy(direct_min_hit_rate=0.9, filter_rule=FilterRule(1000, 0.5, 100))
    assert policy.choose(2000, 200, 50) is Pipeline.P_RLD  # long, low hit, short output: filtered
    assert policy.choose(2000, 200, 500) is Pipeline.P_RLD_MD  # same but long output: relay, then MD
    assert policy.choose(500, 50, 50) is Pipeline.P_RLD_MD  # short input is never filtered
    assert policy.choose(2000, 1900, 500) is Pipeline.P_MD  # high hit: tiny transfer, go direct
    assert policy.choose(2000, 1799, 500) is Pipeline.P_RLD_MD


def test_only_pipelines_the_plan_and_the_live_instances_allow():
    policy = RoutingPolicy(filter_rule=FilterRule(min_input_tokens=1))
    no_relay = frozenset({Pipeline.P_MD})
    assert policy.choose(2000, 0, 10, available=no_relay) is Pipeline.P_MD  # no RLD up: direct anyway
    assert RoutingPolicy(allowed=frozenset({Pipeline.P_D})).choose(10, 0, 10) is Pipeline.P_D
    with pytest.raises(NoRouteError, match="no pipeline"):
        policy.choose(2000, 0, 10, available=frozenset())
    with pytest.raises(ValueError, match="direct_min_hit_rate"):
        RoutingPolicy(direct_min_hit_rate=1.5)


SCENARIO = {
    "name": "two-dc", "model": "deepseek-v3.2",
    "datacenters": [{"name": "dc-a", "inventory": {"H800-SXM": 16}}, {"name": "dc-b", "inventory": {"H20": 16}}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 25, "rtt_ms": 30, "jitter_ms": 5}],
    "workload": {"arrival_rps": 1.0, "classes": [
        {"name": "low", "share": 0.2, "input_tokens": 65536, "output_tokens": 1024, "hit_rate": 0.5},
        {"name": "odd", "share": 0.1, "input_tokens": 65536, "output_tokens": 300, "hit_rate": 0.1},
        {"name": "high", "share": 0.7, "input_tokens": 65536, "output_tokens": 1024, "hit_rate": 0.98}]},
    "sla": {"ttft_p90_s": 2.0, "tpot_s": 0.05},
    "options": {"filter_min_input_tokens": 4096, "filter_max_hit_rate": 0.3, "filter_max_output_tokens": 400},
}


def _plan(routes, pools=None) -> Plan:
    pools = pools or [{"role": "P", "datacenter": "dc-a", "chip": "H800-SXM", "tp": 8, "count": 1},
                      {"role": "RLD", "datacenter": "dc-a", "chip": "H800-SXM", "tp": 8, "count": 1},
                      {"role": "MD", "datacenter": "dc-b", "chip": "H20", "tp": 8, "count": 2}]
    return Plan.model_validate({"scenario": "two-dc", "pools": pools, "routes": routes,
                                "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 25}]})


def test_policy_from_a_plan_follows_its_routes_and_classes():
    routes = [{"request_class": "low", "pipeline": "P-RLD-MD", "src": "dc-a", "dst": "dc-b", "rps": 0.2},
              {"request_class": "odd", "pipeline": "P-RLD", "src": "dc-a", "dst": "dc-a", "rps": 0.1},
              {"request_class": "high", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-b", "rps": 0.7}]
    policy = RoutingPolicy.from_plan(_plan(routes), parse_scenario(SCENARIO))
    assert policy.allowed == frozenset(ALL)
    assert policy.direct_min_hit_rate == pytest.approx((0.5 + 0.98) / 2)
    assert policy.filter_rule == FilterRule(4096, 0.3, 400)
    for cls in SCENARIO["workload"]["classes"]:  # each class lands on the pipeline the plan gave it
        hit = int(cls["hit_rate"] * cls["input_tokens"])
        want = {"low": "P-RLD-MD", "odd": "P-RLD", "high": "P-MD"}[cls["name"]]
        assert policy.choose(cls["input_tokens"], hit, cls["output_tokens"]).value == want


def test_policy_without_routes_follows_the_pools():
    assert RoutingPolicy.from_plan(_plan([])).allowed == frozenset(ALL)
    md_only = [{"role": "P", "datacenter": "dc-a", "chip": "H800-SXM", "tp": 8, "count": 1},
               {"role": "MD", "datacenter": "dc-b", "chip": "H20", "tp": 8, "count": 1}]
    assert RoutingPolicy.from_plan(_plan([], md_only)).allowed == {Pipeline.P_MD}
    pd = [{"role": "P", "datacenter": "dc-a", "chip": "H800-SXM", "tp": 8, "count": 1},
          {"role": "D", "datacenter": "dc-b", "chip": "H20", "tp": 8, "count": 1}]
    assert RoutingPolicy.from_plan(_plan([], pd)).allowed == {Pipeline.P_D}


def test_prefix_index_matches_whole_blocks_and_forgets_the_oldest():
    idx = PrefixIndex(block_size=4, capacity_blocks=3)
    idx.insert([1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert idx.match([1, 2, 3, 4, 5, 6, 7, 8, 0]) == 8
    assert idx.match([1, 2, 3, 4, 0, 6, 7, 8]) == 4  # a changed token ends the chain
    assert idx.match([0, 2, 3, 4]) == 0
    idx.insert([7, 7, 7, 7, 8, 8, 8, 8])  # 4 blocks > capacity 3: the least recently used goes
    assert len(idx) == 3
    assert idx.match([1, 2, 3, 4, 5, 6, 7, 8]) == 4  # [5..8] was used least recently (matches refresh)
