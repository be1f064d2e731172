"""Solve jobs and plans: 202 + job, enum status with FAILED and its error, the plan JSON of
docs/contracts.md, filters and pagination, diff, compare, simulate, metrics."""

from __future__ import annotations

import pytest

from tests.placer.service.api.support import solved_plan, wait_solve
from tests.db.support import micro


def test_post_plans_answers_202_with_a_pending_job_then_the_plan(client):
    sid = client.post("/scenarios", json=micro()).json()["id"]
    started = client.post("/plans", json={"scenario_id": sid, "time_limit_s": 20})
    assert started.status_code == 202
    body = started.json()
    assert body["status"] == "PENDING" and body["plan_id"] is None and body["error"] is None
    assert started.headers["location"] == f"/solve-jobs/{body['id']}"
    job = wait_solve(client, body["id"])
    assert job["status"] == "SUCCEEDED" and job["error"] is None and job["scenario_id"] == sid
    assert job["started_at"] <= job["finished_at"]
    plan = client.get(f"/plans/{job['plan_id']}").json()
    assert plan["scenario"] == "micro" and plan["schema_version"] == 1
    inputs = client.get(f"/plans/{job['plan_id']}/inputs").json()
    assert inputs["scenario"] == micro() and inputs["objective"] == "bcr" and inputs["time_limit_s"] == 20


def test_the_api_plan_is_the_one_the_cli_library_function_gives(client):
    from placer.optimize import SolveConfig, optimize
    from placer.specs import parse_scenario

    _, plan = solved_plan(client, {"scenario": micro(), "use_profiles": False})
    direct = optimize(parse_scenario(micro()), SolveConfig(marginals=False))
    assert sorted((p["role"], p["datacenter"], p["chip"], p["tp"], p["count"]) for p in plan["pools"]) == \
        sorted((p.role, p.datacenter, p.chip, p.tp, p.count) for p in direct.pools)
    assert plan["metrics"]["bcr_requests_per_usd"] == pytest.approx(direct.metrics.bcr_requests_per_usd, rel=1e-6)


def test_an_infeasible_scenario_fails_the_job_with_the_reason(client):
    impossible = micro(sla={"ttft_p90_s": 0.001, "tpot_s": 0.05})
    job = wait_solve(client, client.post("/plans", json={"scenario": impossible}).json()["id"])
    assert job["status"] == "FAILED" and job["plan_id"] is None
    assert job["error"].startswith("infeasible") and "TTFT" in job["error"]
    assert client.get("/plans").json()["total"] == 0


@pytest.mark.parametrize("body, words", [
    ({}, "exactly one of scenario_id and scenario"),
    ({"scenario_id": 1, "scenario": micro()}, "exactly one"),
    ({"scenario": micro(), "objective": "fastest"}, "objective"),
    ({"scenario": micro(), "time_limit_s": 0}, "time_limit_s"),
    ({"scenario": micro(), "objective": "max-goodput"}, "budget_usd_per_h"),
    ({"scenario": micro(model="gpt-9")}, "gpt-9"),
])
def test_bad_plan_requests_are_422_and_start_nothing(client, body, words):
    response = client.post("/plans", json=body)
    assert response.status_code == 422
    assert words in " ".join(d["msg"] + " " + ".".join(map(str, d["loc"])) for d in response.json()["detail"])
    assert client.get("/solve-jobs").json()["total"] == 0


def test_unknown_ids_are_404(client):
    assert client.post("/plans", json={"scenario_id": 12345}).status_code == 404
    assert client.get("/plans/12345").status_code == 404
    assert client.get("/solve-jobs/12345").status_code == 404
    assert client.get("/plans/1/diff/2").status_code == 404
    assert client.get("/plans/0").status_code == 404  # an id no row can have names nothing, like any unknown id
    assert client.get("/plans/99999999999999999999").status_code == 404
    assert client.get("/plans/abc").status_code == 422  # not an id at all


def test_plan_list_filters_and_pages(client):
    small = client.post("/scenarios", json=micro()).json()["id"]
    light = micro(name="light", workload={**micro()["workload"], "arrival_rps": 3.0})
    big = client.post("/scenarios", json=light).json()["id"]
    jobs = [client.post("/plans", json={"scenario_id": sid, "objective": objective}).json()["id"]
            for sid in (small, big) for objective in ("bcr", "min-cost")]
    plans = [wait_solve(client, j)["plan_id"] for j in jobs]
    assert None not in plans
    everything = client.get("/plans").json()
    # newest first: by creation time, then id (solves on parallel workers may store out of id order)
    order = [(p["created_at"], p["id"]) for p in everything["items"]]
    assert everything["total"] == 4 and {p["id"] for p in everything["items"]} == set(plans)
    assert order == sorted(order, reverse=True)
    by_name = client.get("/plans", params={"scenario": "light"}).json()
    assert by_name["total"] == 2 and {p["scenario_name"] for p in by_name["items"]} == {"light"}
    by_objective = client.get("/plans", params={"objective": "min-cost", "scenario_id": small}).json()
    assert by_objective["total"] == 1 and by_objective["items"][0]["objective"] == "min-cost"
    ranked = client.get("/plans", params={"sort": "bcr_requests_per_usd", "descending": False}).json()["items"]
    assert [p["bcr_requests_per_usd"] for p in ranked] == sorted(p["bcr_requests_per_usd"] for p in ranked)
    cutoff = ranked[2]["bcr_requests_per_usd"]
    assert client.get("/plans", params={"min_bcr": cutoff}).json()["total"] == 2
    page = client.get("/plans", params={"limit": 3, "offset": 3, "sort": "id", "descending": False}).json()
    assert page["total"] == 4 and [p["id"] for p in page["items"]] == [sorted(plans)[3]]
    assert client.get("/plans", params={"limit": 0}).status_code == 422
    assert client.get("/plans", params={"created_after": "2020-01-01T00:00:00"}).status_code == 422
    assert client.get("/plans", params={"created_after": "2020-01-01T00:00:00Z"}).json()["total"] == 4


def test_diff_of_two_plans_lists_pool_route_and_metric_changes(client):
    light = micro(workload={**micro()["workload"], "arrival_rps": 3.0})
    _, a_plan = solved_plan(client, {"scenario": light})
    job_b, b_plan = solved_plan(client, {"scenario": micro()})
    a_id, b_id = 1, job_b["plan_id"]
    diff = client.get(f"/plans/{a_id}/diff/{b_id}").json()
    assert diff["from"] == a_id and diff["to"] == b_id
    count = {(p["role"], p["datacenter"], p["chip"], p["tp"]): p["count"] for p in a_plan["pools"]}
    for change in diff["pools"]:
        key = (change["role"], change["datacenter"], change["chip"], change["tp"])
        assert change["count_from"] == count.get(key, 0)
        assert change["delta"] == change["count_to"] - change["count_from"]
    assert diff["pool_changes"] == len(diff["pools"]) > 0
    cost = diff["metrics"]["cost_usd_per_h"]
    assert cost["from"] == a_plan["metrics"]["cost_usd_per_h"] and cost["to"] == b_plan["metrics"]["cost_usd_per_h"]
    assert cost["delta"] == pytest.approx(cost["to"] - cost["from"])
    assert any(r["rps_to"] > r["rps_from"] for r in diff["routes"])
    same = client.get(f"/plans/{a_id}/diff/{a_id}").json()
    assert same["pools"] == [] and same["routes"] == [] and same["pool_changes"] == 0


def test_compare_returns_pdd_beside_the_three_baselines(client):
    response = client.post("/compare", json={"scenario": micro(), "time_limit_s": 20})
    assert response.status_code == 200
    body = response.json()
    assert body["pdd"]["scenario"] == "micro"
    assert set(body["baselines"]) == {"same-dc-pd", "cross-dc-pd", "hetero-same-dc-pd", "prfaas", "agg"}
    assert {p["role"] for p in body["pdd"]["pools"]} <= {"P", "RLD", "MD"}
    for name, plan in body["baselines"].items():
        roles = {"agg": {"A"}, "prfaas": {"P", "MD"}}.get(name, {"P", "D"})
        assert "error" in plan or (f"baseline {name}" in plan["notes"]
                                   and {p["role"] for p in plan["pools"]} <= roles), name
    # a baseline that carries less than the offered load comes again at equal load (the CLI's "scaled" rows)
    offered = micro()["workload"]["arrival_rps"]
    for name, plan in body["baselines"].items():
        if "error" not in plan and plan["metrics"]["served_rps"] < offered - 1e-6 and name in body["scaled"]:
            assert abs(body["scaled"][name]["metrics"]["served_rps"] - offered) < 1e-6, name
    assert "same-dc-pd" in body["scaled"] and set(body["scaled"]) <= set(body["baselines"])  # micro: D runs short
    # like with like within the inventory: PDD under the partial baseline's rule too, said in the first line
    best = body["pdd_best_within_inventory"]
    assert best["notes"][0].startswith("PDD at its best BCR within the inventory")
    summary = body["within_inventory"]
    assert summary["pdd"]["served_rps"] == pytest.approx(offered, rel=1e-3)
    assert summary["pdd_best"]["bcr_requests_per_usd"] >= summary["pdd"]["bcr_requests_per_usd"]
    assert "its best BCR" in body["headline"].splitlines()[0]
    assert client.post("/compare", json={"scenario_id": 777}).status_code == 404


def test_simulate_a_stored_plan_and_keep_the_result(client):
    job, plan = solved_plan(client, {"scenario": micro()})
    response = client.post("/simulate", json={"plan_id": job["plan_id"], "requests": 500, "seed": 7})
    assert response.status_code == 201, response.text
    body = response.json()
    result = body["result"]
    assert result["requests"] == 500 and 0 <= result["sla_attainment"] <= 1
    assert {"ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "goodput_rps",
            "bcr_requests_per_usd", "rld_token_share", "handoffs", "links", "pools"} <= set(result)
    again = client.post("/simulate", json={"plan_id": job["plan_id"], "requests": 500, "seed": 7}).json()
    assert again["result"] == result  # the same seed gives the same result
    listed = client.get("/simulations", params={"plan_id": job["plan_id"]}).json()
    assert listed["total"] == 2 and client.get(f"/simulations/{body['id']}").json()["result"] == result
    assert client.post("/simulate", json={"plan_id": 9999}).status_code == 404
    missing = client.post("/simulate", json={"plan_id": job["plan_id"], "trace": "/nonexistent/trace.jsonl"})
    assert missing.status_code == 422 and "/nonexistent/trace.jsonl" in str(missing.json()["detail"])


def test_simulate_answers_501_in_a_build_without_the_simulator(client, monkeypatch):
    from placer.service.api.routers import simulate

    job, _ = solved_plan(client, {"scenario": micro()})
    monkeypatch.setattr(simulate, "simulator", lambda: None)
    response = client.post("/simulate", json={"plan_id": job["plan_id"]})
    assert response.status_code == 501 and "simulator" in response.json()["detail"]
    assert client.get("/simulations").json()["total"] == 0


def test_metrics_count_solves_by_status(client):
    solved_plan(client, {"scenario": micro()})
    failed = client.post("/plans", json={"scenario": micro(sla={"ttft_p90_s": 0.001, "tpot_s": 0.05})}).json()
    wait_solve(client, failed["id"])
    text = client.get("/metrics").text
    assert 'placer_solve_jobs{status="SUCCEEDED"} 1.0' in text
    assert 'placer_solve_jobs{status="FAILED"} 1.0' in text
    assert 'placer_solve_seconds_count{objective="bcr",status="SUCCEEDED"} 1.0' in text
    assert 'placer_solve_seconds_count{objective="bcr",status="FAILED"} 1.0' in text


def test_a_restart_finishes_queued_solves_and_fails_interrupted_ones(tmp_path):
    from fastapi.testclient import TestClient

    import db
    from db import repo
    from db.session import session_scope
    from placer.service.api import create_app
    from tests.placer.service.api.support import AUTH, make_settings

    url = f"sqlite:///{tmp_path / 'restart.db'}"
    engine, factory = db.connect(url)
    with session_scope(factory) as s:
        request = {"scenario": micro(), "objective": "bcr", "solver": "ortools", "time_limit_s": 20,
                   "marginals": False, "measured": {}}
        queued = repo.create_solve_job(s, scenario_name="micro", request=request).id
        running = repo.create_solve_job(s, scenario_name="micro", request=request).id
        repo.claim_solve_job(s, running)
    engine.dispose()
    with TestClient(create_app(make_settings(url)), headers=AUTH) as client:
        assert wait_solve(client, queued)["status"] == "SUCCEEDED"
        interrupted = client.get(f"/solve-jobs/{running}").json()
        assert interrupted["status"] == "FAILED" and "interrupted" in interrupted["error"]
