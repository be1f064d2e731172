"""Replanning jobs over the API: create, run, read runs, adopt a proposal, idempotency, 409."""

from __future__ import annotations

from tests.placer.service.api.support import wait_run
from tests.db.support import two_dc, write_trace


def _job(client, trace, **changes) -> dict:
    sid = client.post("/scenarios", json=two_dc()).json()["id"]
    body = {"name": "replan", "scenario_id": sid, "schedule": {"kind": "cron", "expr": "0 * * * *"},
            "workload": {"kind": "trace", "path": str(trace)}, "policy": {"mode": "propose", "min_bcr_gain_pct": 5},
            **changes}
    response = client.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def _run(client, job_id, **headers) -> dict:
    response = client.post(f"/jobs/{job_id}/runs", headers=headers)
    assert response.status_code in (200, 202), response.text
    return wait_run(client, job_id, response.json()["id"])


def test_run_propose_adopt_over_the_api(client, tmp_path):
    trace = write_trace(tmp_path / "t.jsonl", 0.99)
    job = _job(client, trace)
    assert job["policy"] == {"mode": "propose", "min_bcr_gain_pct": 5.0, "max_pool_changes": None, "cooldown_s": 0.0,
                             "deploy_url": None, "apply_timeout_s": 600.0}
    first = _run(client, job["id"])
    assert first["outcome"] == "INITIAL"
    assert client.get(f"/jobs/{job['id']}").json()["current_plan_id"] == first["plan_id"]
    write_trace(trace, 0.90)
    proposal = _run(client, job["id"])
    assert proposal["outcome"] == "PROPOSED" and proposal["diff"]["pool_changes"] > 0
    diff = client.get(f"/plans/{first['plan_id']}/diff/{proposal['plan_id']}").json()
    assert diff["pools"] == proposal["diff"]["pools"]
    runs = client.get(f"/jobs/{job['id']}/runs").json()
    assert runs["total"] == 2 and [r["id"] for r in runs["items"]] == [proposal["id"], first["id"]]
    assert client.get(f"/jobs/{job['id']}/runs", params={"outcome": "PROPOSED"}).json()["total"] == 1
    adopted = client.post(f"/jobs/{job['id']}/runs/{proposal['id']}/adopt")
    assert adopted.status_code == 200 and adopted.json()["plan_id"] == proposal["plan_id"]
    assert client.get(f"/jobs/{job['id']}").json()["current_plan_id"] == proposal["plan_id"]
    deployments = client.get("/deployments", params={"job_id": job["id"]}).json()
    assert [d["plan_id"] for d in deployments["items"]] == [proposal["plan_id"]]
    again = client.post(f"/jobs/{job['id']}/runs/{proposal['id']}/adopt")
    assert again.status_code == 409
    text = client.get("/metrics").text
    assert 'placer_replan_runs{outcome="PROPOSED"} 1.0' in text and 'placer_replan_runs{outcome="INITIAL"} 1.0' in text


def test_an_idempotency_key_repeats_the_first_answer(client, tmp_path):
    job = _job(client, write_trace(tmp_path / "t.jsonl", 0.99))
    first = client.post(f"/jobs/{job['id']}/runs", headers={"Idempotency-Key": "abc"})
    assert first.status_code == 202
    wait_run(client, job["id"], first.json()["id"])
    second = client.post(f"/jobs/{job['id']}/runs", headers={"Idempotency-Key": "abc"})
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    assert client.get(f"/jobs/{job['id']}/runs").json()["total"] == 1


def test_a_run_while_another_holds_the_job_is_409(client, tmp_path):
    from db import repo
    from db.session import session_scope

    job = _job(client, write_trace(tmp_path / "t.jsonl", 0.99))
    factory = client.app.state.service.factory
    with session_scope(factory) as s:
        assert repo.lock_job(s, job["id"], 999, ttl_s=600)
    busy = client.post(f"/jobs/{job['id']}/runs")
    assert busy.status_code == 409 and "run 999" in busy.json()["detail"]


def test_job_validation_conflicts_and_lifecycle(client, tmp_path):
    trace = write_trace(tmp_path / "t.jsonl", 0.99)
    job = _job(client, trace)
    dup = client.post("/jobs", json={"name": "replan", "scenario_id": job["scenario_id"],
                                     "schedule": {"kind": "interval", "seconds": 60},
                                     "workload": {"kind": "request_log"}})
    assert dup.status_code == 409
    bad = [
        ({"schedule": {"kind": "cron", "expr": "every day"}}, "crontab"),
        ({"schedule": {"kind": "interval", "seconds": 0}}, "seconds"),
        ({"workload": {"kind": "trace", "path": str(tmp_path / "nope.jsonl")}}, "nope.jsonl"),
        ({"policy": {"mode": "yolo"}}, "mode"),
        ({"policy": {"min_bcr_gain_pct": -1}}, "min_bcr_gain_pct"),
    ]
    for change, words in bad:
        body = {"name": "other", "scenario_id": job["scenario_id"], "schedule": {"kind": "interval", "seconds": 60},
                "workload": {"kind": "request_log"}, **change}
        response = client.post("/jobs", json=body)
        assert response.status_code == 422, (change, response.text)
        assert words in str(response.json()["detail"]), (change, response.text)
    missing = client.post("/jobs", json={"name": "x", "scenario_id": 999,
                                         "schedule": {"kind": "interval", "seconds": 60},
                                         "workload": {"kind": "request_log"}})
    assert missing.status_code == 404
    assert client.delete(f"/scenarios/{job['scenario_id']}").status_code == 409
    patched = client.patch(f"/jobs/{job['id']}", json={"enabled": False, "policy": {"mode": "apply"}})
    assert patched.status_code == 200 and patched.json()["enabled"] is False
    assert patched.json()["policy"]["mode"] == "apply"
    assert client.patch(f"/jobs/{job['id']}", json={"schedule": None}).status_code == 422
    assert client.get("/jobs", params={"enabled": False}).json()["total"] == 1
    assert client.delete(f"/jobs/{job['id']}").status_code == 204
    assert client.get(f"/jobs/{job['id']}").status_code == 404
    assert client.delete(f"/scenarios/{job['scenario_id']}").status_code == 204


def test_the_service_scheduler_reports_next_fire_times(tmp_path):
    from fastapi.testclient import TestClient

    from placer.service.api import create_app
    from tests.placer.service.api.support import AUTH, make_settings

    app = create_app(make_settings(f"sqlite:///{tmp_path / 's.db'}", scheduler=True))
    with TestClient(app, headers=AUTH) as client:
        assert client.get("/healthz").json()["scheduler"] == "running"
        job = _job(client, write_trace(tmp_path / "t.jsonl", 0.99))
        assert job["next_run_at"] is not None and job["next_run_at"].endswith(":00Z")
        off = client.patch(f"/jobs/{job['id']}", json={"enabled": False}).json()
        assert off["next_run_at"] is None
