"""Plan diffs: what a user reviewing a proposal reads."""

from __future__ import annotations

import pytest

from placer.plan import Metrics, Plan, PoolOut, Route
from placer.service.jobs.diff import plan_diff


def _plan(pools, routes, bcr=100.0, wan=1.0) -> Plan:
    return Plan(scenario="s", pools=[PoolOut(role=r, datacenter=d, chip=c, tp=t, count=n) for r, d, c, t, n in pools],
                routes=[Route(request_class=k, pipeline=p, src=s, dst=d, rps=x) for k, p, s, d, x in routes],
                metrics=Metrics(bcr_requests_per_usd=bcr, wan_gbit_per_s=wan))


def test_diff_reports_added_removed_and_resized_pools_routes_and_metric_deltas():
    a = _plan([("P", "a", "H100-SXM", 1, 2), ("MD", "b", "L40S", 2, 1)],
              [("hot", "P-MD", "a", "b", 3.0), ("cold", "P-MD", "a", "a", 1.0)], bcr=100.0, wan=2.0)
    b = _plan([("P", "a", "H100-SXM", 1, 3), ("RLD", "a", "H100-SXM", 1, 1), ("MD", "b", "L40S", 2, 1)],
              [("hot", "P-RLD-MD", "a", "b", 3.0), ("cold", "P-MD", "a", "a", 1.0)], bcr=120.0, wan=5.0)
    d = plan_diff(a, b)
    pools = {(p["role"], p["chip"]): (p["count_from"], p["count_to"], p["change"]) for p in d["pools"]}
    assert pools == {("P", "H100-SXM"): (2, 3, "changed"), ("RLD", "H100-SXM"): (0, 1, "added")}
    assert d["pool_changes"] == 2 and d["instances_added"] == 2 and d["instances_removed"] == 0
    routes = {(r["request_class"], r["pipeline"]): r["change"] for r in d["routes"]}
    assert routes == {("hot", "P-MD"): "removed", ("hot", "P-RLD-MD"): "added"}
    assert d["metrics"]["bcr_requests_per_usd"]["delta_pct"] == pytest.approx(20.0)
    assert d["metrics"]["wan_gbit_per_s"]["delta"] == pytest.approx(3.0)
    assert d["chips"] == {"from": 4, "to": 6, "delta": 2}


def test_a_plan_diffed_with_itself_is_empty():
    a = _plan([("P", "a", "H100-SXM", 1, 2)], [("hot", "P-MD", "a", "a", 3.0)])
    d = plan_diff(a, a)
    assert d["pools"] == [] and d["routes"] == [] and d["pool_changes"] == 0
    assert all(m["delta"] == 0 for m in d["metrics"].values())
