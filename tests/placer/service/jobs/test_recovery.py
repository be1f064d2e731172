"""Crash recovery of replanning runs: a run left PENDING or RUNNING by a killed service is
FAILED at the next start-up, its job's lock released, and the job accepts a run at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from db import repo
from db.models import RunStatus
from db.session import session_scope
from placer.service.jobs import runner
from tests.db.support import write_trace
from tests.placer.service.jobs.support import add_job

TOKEN = "recovery-test-token"


def test_recovery_fails_interrupted_runs_and_releases_their_locks(factory, trace):
    job_id = add_job(factory, trace)
    running = runner.trigger(factory, job_id).run_id  # holds the lock, as a crashed process left it
    with session_scope(factory) as s:
        repo.get_run(s, running).status = RunStatus.RUNNING
    assert runner.trigger(factory, job_id).busy_run_id == running  # stuck: every trigger is refused

    assert runner.recover_runs(factory) == [running]
    with factory() as s:
        run = repo.get_run(s, running)
        assert run.status == RunStatus.FAILED and "interrupted by restart" in run.error
        assert repo.get_job(s, job_id).active_run_id is None
    assert runner.trigger(factory, job_id).created


def test_a_run_whose_lock_expired_is_failed_by_the_next_trigger(factory, trace):
    """Without a service restart (e.g. `placer jobs run-now` killed), the lock's expiry frees the job."""
    from datetime import timedelta

    from db.types import utcnow

    job_id = add_job(factory, trace)
    stuck = runner.trigger(factory, job_id).run_id
    with session_scope(factory) as s:
        repo.get_run(s, stuck).status = RunStatus.RUNNING
        repo.get_job(s, job_id).lock_expires_at = utcnow() - timedelta(seconds=1)
    fresh = runner.trigger(factory, job_id)
    assert fresh.created and fresh.run_id != stuck
    with factory() as s:
        run = repo.get_run(s, stuck)
        assert run.status == RunStatus.FAILED and "lock expired" in run.error


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(db_url: str, port: int) -> subprocess.Popen:
    env = {**os.environ, "PLACER_DATABASE_URL": db_url, "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.Popen([sys.executable, "-m", "placer.cli", "serve", "--port", str(port), "--token", TOKEN,
                             "--no-scheduler"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return proc
        except httpx.TransportError:
            assert proc.poll() is None, "placer serve exited"
            assert time.monotonic() < deadline, "placer serve did not come up"
            time.sleep(0.2)


def test_sigkill_mid_run_leaves_no_stuck_run_after_a_restart(tmp_path):
    """kill -9 while a replanning run is RUNNING; after a restart the run is FAILED and run-now works."""
    db_url = f"sqlite:///{tmp_path / 'placer.db'}"
    trace = write_trace(tmp_path / "big.jsonl", 0.99, requests=300_000)  # seconds of fitting: time to kill
    import db

    engine, factory = db.connect(db_url)
    job_id = add_job(factory, trace)
    engine.dispose()
    port, auth = _free_port(), {"Authorization": f"Bearer {TOKEN}"}
    proc = _start(db_url, port)
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/jobs/{job_id}/runs", headers=auth, timeout=30)
        assert r.status_code == 202, r.text
        run_id = r.json()["id"]
        deadline = time.monotonic() + 30
        while httpx.get(f"http://127.0.0.1:{port}/jobs/{job_id}/runs/{run_id}", headers=auth,
                        timeout=10).json()["status"] != "RUNNING":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.02)
        busy = httpx.post(f"http://127.0.0.1:{port}/jobs/{job_id}/runs", headers=auth, timeout=30)
        assert busy.status_code == 409  # the lock is held while it runs
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

        proc = _start(db_url, port)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "ok"  # the alias
        run = httpx.get(f"http://127.0.0.1:{port}/jobs/{job_id}/runs/{run_id}", headers=auth, timeout=10).json()
        assert run["status"] == "FAILED" and "interrupted by restart" in run["error"]
        again = httpx.post(f"http://127.0.0.1:{port}/jobs/{job_id}/runs", headers=auth, timeout=30)
        assert again.status_code == 202, again.text
    finally:
        proc.kill()
        proc.wait(timeout=30)
