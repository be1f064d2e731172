"""The smoke path over real HTTP: uvicorn on a free port, httpx as the client."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.placer.service.api.support import AUTH, live_server, make_settings
from tests.db.support import micro


def test_store_a_scenario_solve_it_and_read_the_plan_over_http(tmp_path):
    with live_server(make_settings(f"sqlite:///{tmp_path / 'live.db'}")) as url:
        with httpx.Client(base_url=url, headers=AUTH, timeout=30) as http:
            assert httpx.get(f"{url}/healthz").json()["database"] == "ok"
            assert httpx.get(f"{url}/plans").status_code == 401
            scenario = http.post("/scenarios", json=micro())
            assert scenario.status_code == 201
            started = http.post("/plans", json={"scenario_id": scenario.json()["id"]})
            assert started.status_code == 202 and started.headers["location"] == f"/solve-jobs/{started.json()['id']}"
            deadline = time.monotonic() + 60
            while (job := http.get(started.headers["location"]).json())["status"] not in ("SUCCEEDED", "FAILED"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert job["status"] == "SUCCEEDED"
            plan = http.get(f"/plans/{job['plan_id']}").json()
    assert plan["schema_version"] == 1 and plan["scenario"] == "micro" and plan["objective"] == "bcr"
    assert {"metrics", "pools", "routes", "links", "handoff", "solver", "binding"} <= set(plan)
    m = plan["metrics"]
    assert m["bcr_requests_per_usd"] > 0
    assert m["bcr_requests_per_usd"] == pytest.approx(m["goodput_rps"] * 3600 / m["cost_usd_per_h"], rel=1e-6)
    assert all(p["role"] in ("P", "RLD", "MD") and p["count"] > 0 for p in plan["pools"])
