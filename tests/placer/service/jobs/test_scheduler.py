"""The APScheduler-backed scheduler fires enabled jobs on their schedule and follows the table."""

from __future__ import annotations

import time

from db import repo
from db.session import session_scope
from placer.service.jobs import ReplanScheduler
from tests.placer.service.jobs.support import add_job


def _runs(factory, job_id) -> list:
    with factory() as s:
        return repo.list_runs(s, job_id)[0]


def test_an_interval_job_runs_on_schedule_and_stops_when_disabled(factory, trace):
    job_id = add_job(factory, trace)
    with session_scope(factory) as s:
        repo.update_job(s, job_id, schedule={"kind": "interval", "seconds": 1})
    scheduler = ReplanScheduler(factory, max_workers=1, sync_interval_s=3600)
    scheduler.start()
    try:
        assert job_id in scheduler.scheduled()
        deadline = time.monotonic() + 30
        while not any(r.finished_at for r in _runs(factory, job_id)) and time.monotonic() < deadline:
            time.sleep(0.1)
        runs = _runs(factory, job_id)
        assert runs and all(r.trigger == "schedule" for r in runs)
        assert runs[-1].outcome is not None and runs[-1].outcome.value == "INITIAL"
        with session_scope(factory) as s:
            repo.update_job(s, job_id, enabled=False)
        scheduler.sync()
        assert job_id not in scheduler.scheduled()
    finally:
        scheduler.shutdown()


def test_jobs_added_elsewhere_are_picked_up_by_sync(factory, trace):
    scheduler = ReplanScheduler(factory, sync_interval_s=3600)
    scheduler.start()
    try:
        assert scheduler.scheduled() == {}
        job_id = add_job(factory, trace)  # e.g. `placer jobs add` from another process
        scheduler.sync()
        assert job_id in scheduler.scheduled() and scheduler.scheduled()[job_id] is not None
        with session_scope(factory) as s:
            repo.delete_job(s, job_id)
        scheduler.sync()
        assert scheduler.scheduled() == {}
    finally:
        scheduler.shutdown()
    assert not scheduler.running
