"""Duplicate triggers do no harm: one run per idempotency key, one run of a job at a time."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from db import repo
from db.models import RunOutcome
from placer.service.jobs import runner
from placer.service.jobs.scheduler import ReplanScheduler, slot_key
from tests.placer.service.jobs.support import add_job


def test_concurrent_triggers_make_one_run_and_the_rest_skip(any_factory, trace):
    job_id = add_job(any_factory, trace)
    results, barrier = [], threading.Barrier(4)

    def fire():
        barrier.wait()
        results.append(runner.trigger(any_factory, job_id))

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = [r for r in results if r.created]
    assert len(created) == 1
    assert all(r.busy_run_id == created[0].run_id for r in results if not r.created)
    assert runner.execute(any_factory, created[0].run_id) == RunOutcome.INITIAL
    with any_factory() as s:
        runs, _ = repo.list_runs(s, job_id)
        assert sorted(r.outcome.value for r in runs) == ["INITIAL", "SKIPPED", "SKIPPED", "SKIPPED"]
        assert all("in progress" in r.reason for r in runs if r.outcome == RunOutcome.SKIPPED)
        assert repo.list_plans(s)[1] == 1 and repo.get_job(s, job_id).active_run_id is None


def test_a_repeated_key_returns_the_first_run_and_solves_once(any_factory, trace):
    job_id = add_job(any_factory, trace)
    first_id, first = runner.run_now(any_factory, job_id, idempotency_key="deploy-42")
    again_id, again = runner.run_now(any_factory, job_id, idempotency_key="deploy-42")
    assert (again_id, again) == (first_id, first) == (first_id, RunOutcome.INITIAL)
    with any_factory() as s:
        assert repo.list_runs(s, job_id)[1] == 1 and repo.list_plans(s)[1] == 1


def test_two_services_firing_the_same_slot_make_one_run(factory, trace):
    job_id = add_job(factory, trace)
    with factory() as s:
        job = repo.get_job(s, job_id)
        schedule, anchor = dict(job.schedule), job.created_at
    slot = anchor + timedelta(hours=3, milliseconds=40)
    a, b = ReplanScheduler(factory), ReplanScheduler(factory)
    a._fire(job_id, schedule, anchor, now=slot)
    b._fire(job_id, schedule, anchor, now=slot + timedelta(milliseconds=900))
    with factory() as s:
        runs, total = repo.list_runs(s, job_id)
    assert total == 1 and runs[0].trigger == "schedule" and runs[0].outcome == RunOutcome.INITIAL
    assert runs[0].idempotency_key == slot_key(job_id, schedule, anchor, slot)
    b._fire(job_id, schedule, anchor, now=slot + timedelta(hours=1))  # the next slot is a new run
    with factory() as s:
        assert repo.list_runs(s, job_id)[1] == 2


def test_cron_slots_are_minutes():
    t = datetime(2026, 11, 29, 12, 30, 0, 200000, tzinfo=timezone.utc)
    cron = {"kind": "cron", "expr": "30 12 * * *"}
    assert slot_key(1, cron, t, t) == slot_key(1, cron, t, t + timedelta(seconds=20))
    assert slot_key(1, cron, t, t) != slot_key(1, cron, t, t + timedelta(days=1))
