"""The repository on both backends: conflicts, filters, pagination, locks, idempotency."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from db import repo
from db.errors import ConflictError, NotFoundError
from db.models import DeploymentStatus, RunOutcome, SolveStatus
from db.session import session_scope
from placer.plan import Metrics, Plan, PoolOut
from tests.db.support import micro


def _plan(name: str, bcr: float, cost: float) -> dict:
    """A plan document, the plain mapping db stores."""
    plan = Plan(scenario=name, pools=[PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=1, count=1)],
                metrics=Metrics(bcr_requests_per_usd=bcr, cost_usd_per_h=cost, goodput_rps=1.0))
    return plan.model_dump(mode="json", exclude_none=True)


def _job(session, name: str = "nightly"):
    scenario = repo.find_scenario(session, "micro") or repo.create_scenario(session, micro())
    return repo.create_job(session, name=name, scenario_id=scenario.id,
                           schedule={"kind": "interval", "seconds": 60}, workload={"kind": "request_log"},
                           policy={"mode": "propose"})


def test_duplicate_scenario_name_is_a_conflict_and_nothing_changes(factory):
    with session_scope(factory) as s:
        first = repo.create_scenario(s, micro())
    with pytest.raises(ConflictError, match="micro"):
        with session_scope(factory) as s:
            repo.create_scenario(s, micro(options={"tp_degrees": [1]}))
    with factory() as s:
        rows, total = repo.list_scenarios(s)
        assert total == 1 and rows[0].id == first.id and rows[0].spec == micro()


def test_scenario_update_rename_and_delete(factory):
    with session_scope(factory) as s:
        a = repo.create_scenario(s, micro())
        repo.create_scenario(s, micro(name="other"))
    with pytest.raises(ConflictError):
        with session_scope(factory) as s:
            repo.update_scenario(s, a.id, micro(name="other"))
    with session_scope(factory) as s:
        repo.update_scenario(s, a.id, micro(name="renamed"))
    with session_scope(factory) as s:
        assert repo.get_scenario(s, a.id).name == "renamed"
        repo.delete_scenario(s, a.id)
    with factory() as s, pytest.raises(NotFoundError):
        repo.get_scenario(s, a.id)


def test_a_scenario_used_by_a_job_cannot_be_deleted(factory):
    with session_scope(factory) as s:
        job = _job(s)
        scenario_id = job.scenario_id
    with pytest.raises(ConflictError, match="nightly"):
        with session_scope(factory) as s:
            repo.delete_scenario(s, scenario_id)


def test_plans_filter_sort_and_paginate(factory):
    with session_scope(factory) as s:
        for i in range(7):
            repo.save_plan(s, _plan("a" if i % 2 else "b", bcr=100.0 + i, cost=10.0 - i), inputs={"i": i})
    with factory() as s:
        rows, total = repo.list_plans(s, scenario="a")
        assert total == 3 and {r.scenario_name for r in rows} == {"a"}
        rows, total = repo.list_plans(s, min_bcr=104.0, sort="bcr_requests_per_usd", descending=False)
        assert [r.bcr_requests_per_usd for r in rows] == [104.0, 105.0, 106.0]
        page1, total = repo.list_plans(s, sort="id", descending=False, limit=3, offset=0)
        page3, _ = repo.list_plans(s, sort="id", descending=False, limit=3, offset=6)
        assert total == 7 and [r.inputs["i"] for r in page1] == [0, 1, 2] and [r.inputs["i"] for r in page3] == [6]
        rows, _ = repo.list_plans(s, max_cost=5.0)
        assert sorted(r.cost_usd_per_h for r in rows) == [4.0, 5.0]


def test_stored_plan_round_trips_to_the_same_plan_json(factory):
    plan = _plan("micro", 123.0, 4.0)
    with session_scope(factory) as s:
        row = repo.save_plan(s, plan, inputs={"scenario": micro()})
    with factory() as s:
        stored = repo.get_plan(s, row.id)
        assert stored.plan == plan and stored.bcr_requests_per_usd == 123.0
        assert stored.created_at.tzinfo is not None


def test_a_solve_job_is_claimed_by_exactly_one_worker(factory):
    with session_scope(factory) as s:
        job = repo.create_solve_job(s, scenario_name="micro", request={})
    wins = []

    def claim():
        with session_scope(factory) as s:
            wins.append(repo.claim_solve_job(s, job.id))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
    with session_scope(factory) as s:
        repo.finish_solve_job(s, job.id, error="boom", error_status=500)
    with factory() as s:
        assert repo.solve_jobs_by_status(s)["FAILED"] == 1
        assert repo.get_solve_job(s, job.id).status == SolveStatus.FAILED


def test_the_job_lock_admits_one_run_and_expires(factory):
    with session_scope(factory) as s:
        job_id = _job(s).id
    results = []

    def lock(run_id):
        with session_scope(factory) as s:
            results.append(repo.lock_job(s, job_id, run_id, ttl_s=600))

    threads = [threading.Thread(target=lock, args=(i + 1,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True]
    with session_scope(factory) as s:
        holder = repo.get_job(s, job_id).active_run_id
        assert repo.lock_job(s, job_id, 99, ttl_s=600) is False
        repo.unlock_job(s, job_id, holder)
        assert repo.lock_job(s, job_id, 99, ttl_s=-1) is True  # taken, already expired
        assert repo.lock_job(s, job_id, 100, ttl_s=600) is True  # so the next one may take it


def test_a_repeated_idempotency_key_returns_the_first_run(factory):
    with session_scope(factory) as s:
        job_id = _job(s).id
    with session_scope(factory) as s:
        first, created = repo.create_run(s, job_id, "schedule", "schedule:1:42")
        assert created
    with session_scope(factory) as s:
        again, created = repo.create_run(s, job_id, "schedule", "schedule:1:42")
        assert not created and again.id == first.id
    with factory() as s:
        assert repo.list_runs(s, job_id)[1] == 1


def test_a_new_deployment_supersedes_the_jobs_live_one(factory):
    with session_scope(factory) as s:
        job_id = _job(s).id
        p1 = repo.save_plan(s, _plan("micro", 1, 1), inputs={})
        p2 = repo.save_plan(s, _plan("micro", 2, 1), inputs={})
        d1 = repo.create_deployment(s, p1.id, job_id)
        d2 = repo.create_deployment(s, p2.id, job_id)
    with factory() as s:
        rows, _ = repo.list_deployments(s, job_id=job_id)
        status = {r.id: r.status for r in rows}
        assert status == {d1.id: DeploymentStatus.SUPERSEDED, d2.id: DeploymentStatus.REQUESTED}


def test_latest_profile_per_chip_feeds_the_solver(factory):
    old = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with session_scope(factory) as s:
        repo.add_profile(s, chip="H100-SXM", compute_efficiency=0.5, measured_at=old)
        new = repo.add_profile(s, chip="H100-SXM", compute_efficiency=0.7, mem_bw_efficiency=0.9,
                               measured_at=old + timedelta(days=1))
        repo.add_profile(s, chip="L40S", interconnect_efficiency=0.6, measured_at=old)
    with factory() as s:
        measured = repo.latest_profiles(s, ["H100-SXM", "L40S", "H20"])
    assert measured["H100-SXM"]["compute_efficiency"] == 0.7
    assert measured["H100-SXM"]["mem_bw_efficiency"] == 0.9
    assert measured["H100-SXM"]["profile"].startswith(f"profile {new.id} ")
    assert measured["L40S"] == {"interconnect_efficiency": 0.6, "profile": measured["L40S"]["profile"]}
    assert "H20" not in measured


def test_request_window_selects_by_arrival_time(factory):
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
    rows = [{"arrival_at": t0 + timedelta(seconds=i), "input_tokens": 100, "output_tokens": 10,
             "prefix_hit_tokens": 90, "pipeline": "P-MD"} for i in range(10)]
    with session_scope(factory) as s:
        assert repo.add_requests(s, rows) == 10
    with factory() as s:
        got = repo.request_window(s, t0 + timedelta(seconds=3), t0 + timedelta(seconds=7))
    assert [r.arrival_at for r in got] == [t0 + timedelta(seconds=i) for i in range(3, 7)]


def test_runs_by_outcome_counts_finished_runs(factory):
    with session_scope(factory) as s:
        job_id = _job(s).id
        for outcome in (RunOutcome.UNCHANGED, RunOutcome.UNCHANGED, RunOutcome.ADOPTED):
            run, _ = repo.create_run(s, job_id, "manual")
            run.outcome = outcome
        repo.create_run(s, job_id, "manual")
    with factory() as s:
        assert repo.runs_by_outcome(s) == {"UNCHANGED": 2, "ADOPTED": 1}
