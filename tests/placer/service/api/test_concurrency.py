"""20 concurrent POST /plans over real HTTP: every one completes, every plan is stored once."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.placer.service.api.support import AUTH, live_server, make_settings
from tests.db.support import BACKENDS, database_url, micro

N = 20


@pytest.mark.parametrize("backend", BACKENDS)
def test_twenty_concurrent_solves_all_complete_none_lost_or_duplicated(backend, tmp_path):
    with database_url(backend, tmp_path) as url, live_server(make_settings(url, solve_workers=2)) as base:
        with httpx.Client(base_url=base, headers=AUTH, timeout=60) as http:
            sid = http.post("/scenarios", json=micro()).json()["id"]
            rates = [3.0 + 3.0 * i / (N - 1) for i in range(N)]  # twenty different inputs

            def start(rps: float) -> httpx.Response:
                scenario = micro(name=f"micro-{rps:.4f}", workload={**micro()["workload"], "arrival_rps": rps})
                body = {"scenario": scenario} if rps != 3.0 else {"scenario_id": sid}
                with httpx.Client(base_url=base, headers=AUTH, timeout=60) as own:
                    return own.post("/plans", json=body)

            with ThreadPoolExecutor(N) as pool:
                responses = list(pool.map(start, rates))
            assert [r.status_code for r in responses] == [202] * N
            job_ids = [r.json()["id"] for r in responses]
            assert len(set(job_ids)) == N

            deadline = time.monotonic() + 120
            while True:
                jobs = http.get("/solve-jobs", params={"limit": 100}).json()
                if all(j["status"] in ("SUCCEEDED", "FAILED") for j in jobs["items"]) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert jobs["total"] == N
            assert {j["id"] for j in jobs["items"]} == set(job_ids)
            assert [j["status"] for j in jobs["items"]] == ["SUCCEEDED"] * N, [j["error"] for j in jobs["items"]]
            plan_ids = [j["plan_id"] for j in jobs["items"]]
            assert len(set(plan_ids)) == N

            plans = http.get("/plans", params={"limit": 100}).json()
            assert plans["total"] == N and {p["id"] for p in plans["items"]} == set(plan_ids)
            by_job = {j["id"]: j for j in jobs["items"]}
            for rps, job_id in zip(rates, job_ids):
                plan = http.get(f"/plans/{by_job[job_id]['plan_id']}").json()
                expected = micro()["workload"]["arrival_rps"] if rps == 3.0 else rps  # 3.0: the stored scenario
                assert plan["metrics"]["offered_rps"] == pytest.approx(expected)
