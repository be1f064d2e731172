"""Replanning runs end to end on a drifting workload (fit → re-solve → decide → store)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from db import repo
from db.models import DeploymentStatus, RunOutcome, RunStatus
from db.session import session_scope
from placer.service.jobs import runner
from tests.db.support import write_trace
from tests.placer.service.jobs.support import add_job


def _run(factory, job_id, now=None):
    run_id, outcome = runner.run_now(factory, job_id, now=now)
    with factory() as s:
        return repo.get_run(s, run_id), outcome


def _plan(factory, plan_id):
    with factory() as s:
        return repo.get_plan(s, plan_id)


def _rld(plan_row) -> int:
    return sum(p["count"] for p in plan_row.plan["pools"] if p["role"] == "RLD")


def _current(factory, job_id) -> int | None:
    with factory() as s:
        return repo.get_job(s, job_id).current_plan_id


def test_the_first_run_makes_the_current_plan(factory, trace):
    job_id = add_job(factory, trace)
    run, outcome = _run(factory, job_id)
    assert outcome == RunOutcome.INITIAL and run.status == RunStatus.SUCCEEDED
    assert _current(factory, job_id) == run.plan_id
    fitted = {c["name"]: c["hit_rate"] for c in run.workload["classes"]}
    assert max(fitted.values()) == pytest.approx(0.99) and run.workload["arrival_rps"] == pytest.approx(4.0, rel=0.01)
    assert _plan(factory, run.plan_id).source == f"job:{job_id}"


def test_falling_hit_rates_make_the_job_propose_more_relay_decode_or_wan(factory, trace):
    job_id = add_job(factory, trace, min_bcr_gain_pct=5.0)
    first, _ = _run(factory, job_id)
    write_trace(trace, 0.90)  # the hot traffic now misses 10 % of its prefix instead of 1 %
    run, outcome = _run(factory, job_id)
    assert outcome == RunOutcome.PROPOSED, run.reason
    old, new = _plan(factory, first.plan_id), _plan(factory, run.plan_id)
    assert _rld(new) > _rld(old) or new.wan_gbit_per_s > old.wan_gbit_per_s
    assert run.new_bcr > run.baseline_bcr and run.baseline_plan_id == first.plan_id
    assert run.diff["pool_changes"] > 0 and run.diff["metrics"]["wan_gbit_per_s"]["to"] == new.wan_gbit_per_s
    assert _current(factory, job_id) == first.plan_id  # propose: the current plan stays until a user adopts
    with factory() as s:
        assert repo.list_deployments(s, job_id=job_id)[1] == 0
    deployment_id = runner.adopt(factory, job_id, run.id)
    assert _current(factory, job_id) == run.plan_id
    with factory() as s:
        deployments, _ = repo.list_deployments(s, job_id=job_id)
    assert [(d.id, d.plan_id, d.status) for d in deployments] == [
        (deployment_id, run.plan_id, DeploymentStatus.REQUESTED)]


def test_a_drift_below_the_threshold_changes_nothing(factory, trace):
    job_id = add_job(factory, trace, mode="apply", min_bcr_gain_pct=5.0)
    first, _ = _run(factory, job_id)
    write_trace(trace, 0.985)
    run, outcome = _run(factory, job_id)
    assert outcome == RunOutcome.UNCHANGED, run.reason
    assert run.gain_pct is None or run.gain_pct < 5.0
    assert _current(factory, job_id) == first.plan_id
    with factory() as s:
        assert [d.plan_id for d in repo.list_deployments(s, job_id=job_id)[0]] == [first.plan_id]


def test_apply_mode_adopts_once_and_does_not_flap_on_a_steady_workload(factory, trace):
    job_id = add_job(factory, trace, mode="apply", min_bcr_gain_pct=5.0)
    first, _ = _run(factory, job_id)
    write_trace(trace, 0.90)
    adopted, outcome = _run(factory, job_id)
    assert outcome == RunOutcome.ADOPTED and _current(factory, job_id) == adopted.plan_id
    outcomes = [_run(factory, job_id)[1] for _ in range(2)]
    assert outcomes == [RunOutcome.UNCHANGED, RunOutcome.UNCHANGED]
    assert _current(factory, job_id) == adopted.plan_id
    with factory() as s:
        deployments, _ = repo.list_deployments(s, job_id=job_id)
    assert [(d.plan_id, d.status) for d in deployments] == [
        (adopted.plan_id, DeploymentStatus.REQUESTED), (first.plan_id, DeploymentStatus.SUPERSEDED)]


def test_cool_down_holds_a_worthwhile_change(factory, trace):
    job_id = add_job(factory, trace, mode="apply", cooldown_s=3600)
    _run(factory, job_id)
    write_trace(trace, 0.90)
    run, outcome = _run(factory, job_id)
    assert outcome == RunOutcome.HELD and "cool-down" in run.reason
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    run, outcome = _run(factory, job_id, now=later)
    assert outcome == RunOutcome.ADOPTED and _current(factory, job_id) == run.plan_id


def _log(factory, hot_hit: float, now: datetime, n: int = 200, rps: float = 4.0) -> None:
    rows = []
    for i in range(n):
        u = (i * 0.6180339887) % 1.0
        output, hit = (512, hot_hit) if u < 0.8 else (512, 0.3) if u < 0.95 else (128, 0.1)
        rows.append({"arrival_at": now - timedelta(seconds=(n - i) / rps), "input_tokens": 16384,
                     "output_tokens": output, "prefix_hit_tokens": round(hit * 16384), "pipeline": "P-MD"})
    with session_scope(factory) as s:
        repo.add_requests(s, rows)


def test_the_request_log_window_drives_replanning(factory):
    now = datetime.now(timezone.utc)
    job_id = add_job(factory, source={"kind": "request_log", "window_s": 3600, "min_requests": 50})
    _log(factory, 0.99, now - timedelta(hours=2))  # old traffic, outside the window
    run, outcome = _run(factory, job_id, now=now)
    assert outcome == RunOutcome.SKIPPED and "fewer than 50 requests" in run.reason and run.plan_id is None
    _log(factory, 0.99, now)
    first, outcome = _run(factory, job_id, now=now)
    assert outcome == RunOutcome.INITIAL and first.workload["requests"] == 200
    assert first.workload["arrival_rps"] == pytest.approx(4.0, rel=0.05)
    later = now + timedelta(hours=1, minutes=5)
    _log(factory, 0.90, later)
    run, outcome = _run(factory, job_id, now=later)
    assert outcome == RunOutcome.PROPOSED, run.reason
    assert max(c["hit_rate"] for c in run.workload["classes"]) == pytest.approx(0.90, abs=1e-3)


def test_a_failing_run_records_the_error_and_releases_the_lock(factory, tmp_path):
    job_id = add_job(factory, tmp_path / "missing.jsonl")
    run, outcome = _run(factory, job_id)
    assert outcome is None and run.status == RunStatus.FAILED and "missing.jsonl" in run.error
    with factory() as s:
        assert repo.get_job(s, job_id).active_run_id is None
    write_trace(tmp_path / "missing.jsonl", 0.99)
    assert _run(factory, job_id)[1] == RunOutcome.INITIAL
