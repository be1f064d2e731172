"""Issue 43: the executor's `POST /plan` runs the one plan check (placer.plancheck) before it
changes anything — an empty, prefill-less, all-zero or duplicated plan is a 422 naming why, and
every running instance keeps serving (before: 202, "0 joined, N drained", /health degraded)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from executor.cluster import LocalCluster
from executor.placement import placement
from executor.server import create_app
from placer.plan import Plan

TOKEN = "apply-checked-control-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
P = {"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1}
MD = {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1}

BAD = {
    "empty": ([], "no P (or aggregated A) pool"),
    "prefill-less": ([MD], "no P (or aggregated A) pool"),
    "all-counts-0": ([{**P, "count": 0}, {**MD, "count": 0}], "no P (or aggregated A) pool"),
    "duplicate-row": ([P, P, MD], "pools[1] repeats pools[0]"),
}


@pytest.fixture
def served(model_config, engine_config):
    first = Plan.model_validate({"scenario": "two-dc", "pools": [P, MD]})
    cluster = LocalCluster(placement(first), model_config, engine_config, transport="fake", threads=True)
    try:
        yield cluster, TestClient(create_app(cluster.router, deployment=cluster, token=TOKEN), headers=AUTH)
    finally:
        cluster.close()


def test_post_plan_refuses_a_plan_that_cannot_serve_and_keeps_every_instance(served):
    cluster, client = served
    before = sorted(cluster.instances)
    for name, (pools, reason) in BAD.items():
        r = client.post("/plan", json={"scenario": "two-dc", "pools": pools}, params={"grace_s": 0})
        assert r.status_code == 422 and reason in r.text, (name, r.status_code, r.text)
    assert client.get("/plan/status").json()["state"] == "idle"  # no change was started
    assert sorted(cluster.instances) == before
    assert client.get("/health").json()["status"] == "ok"
    out = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
    assert out.status_code == 200, out.text
