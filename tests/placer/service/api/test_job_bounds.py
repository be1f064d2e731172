"""The service's bounds on work (issue 43): scenarios over the size bound are 422 before anything is
built, a solve or a simulation past its deadline is killed and fails naming it, and the next job runs."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from placer.service.jobs.bounds import MAX_DATACENTERS, MAX_ROUTES
from tests.db.support import micro
from tests.placer.service.api.support import AUTH, make_settings, solved_plan, wait_solve
from tests.placer.service.meshes import full_mesh


@pytest.fixture
def make_client(tmp_path):
    from placer.service.api import create_app

    def make(**changes) -> TestClient:
        return TestClient(create_app(make_settings(f"sqlite:///{tmp_path / 'bounds.db'}", **changes)), headers=AUTH)

    return make


def _message(response) -> str:
    return response.json()["detail"][0]["msg"]


def test_a_200_datacenter_mesh_is_refused_at_once_naming_the_field_and_the_limit(make_client):
    """1.3 MB of JSON, under the 4 MiB body limit: it took 241 s and 6.7 GB inside the server."""
    with make_client() as client:
        start = time.monotonic()
        response = client.post("/plans", json={"scenario": full_mesh(200), "time_limit_s": 20})
        assert time.monotonic() - start < 15
        assert response.status_code == 422
        assert _message(response).startswith(f"datacenters: 200 datacenters, over the service's limit of "
                                             f"{MAX_DATACENTERS}")
        assert client.get("/solve-jobs").json()["total"] == 0


def test_a_100_datacenter_mesh_is_refused_naming_its_routes_and_the_limit(make_client):
    with make_client() as client:
        for path, body in (("/plans", {"scenario": full_mesh(100), "time_limit_s": 20}),
                           ("/scenarios", full_mesh(100)),
                           ("/compare", {"scenario": full_mesh(100), "time_limit_s": 20})):
            response = client.post(path, json=body)
            assert response.status_code == 422, (path, response.text)
            assert _message(response).startswith("links: the scenario has 480,000 routes"), path
            assert f"over the service's limit of {MAX_ROUTES:,}" in _message(response)


def test_a_mesh_under_the_bound_is_accepted(make_client):
    with make_client() as client:
        assert client.post("/scenarios", json=full_mesh(30)).status_code == 201  # 43,200 routes


def test_a_solve_past_its_deadline_fails_naming_it_and_the_next_solve_runs(make_client):
    """No margin: a 10 ms time limit is a 10 ms deadline, which no solve meets."""
    with make_client(job_margin_s=0, solve_workers=1) as client:
        started = client.post("/plans", json={"scenario": micro(), "time_limit_s": 0.01})
        assert started.status_code == 202
        job = wait_solve(client, started.json()["id"])
        assert job["status"] == "FAILED"
        assert job["error"].startswith(f"solve job {job['id']} was stopped at its deadline of 0.01 s "
                                       "(its time limit 0.01 s + 0 s)")
        job, plan = solved_plan(client, {"scenario": micro(), "time_limit_s": 60})
        assert plan["metrics"]["bcr_requests_per_usd"] > 0


def test_a_simulation_past_its_deadline_is_504_naming_it(make_client):
    with make_client(simulate_deadline_s=0.5) as client:
        job, _ = solved_plan(client, {"scenario": micro()})
        start = time.monotonic()
        response = client.post("/simulate", json={"plan_id": job["plan_id"], "requests": 50_000})
        assert time.monotonic() - start < 10
        assert response.status_code == 504
        assert response.json()["detail"] == (f"simulation of plan {job['plan_id']} was stopped at its deadline of "
                                              "0.5 s (the service's limit on a simulation, Settings.simulate_deadline_s)"
                                              "; simulate fewer requests")
        assert client.get("/simulations").json()["total"] == 0
