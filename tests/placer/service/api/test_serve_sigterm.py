"""`placer serve` stops on SIGTERM within its bound while a solve runs: the solve's process is killed
and its job FAILED "the service stopped" (it is not re-queued: the job running when a service went down
may be what brought it down); a job still queued stays PENDING and runs at the next start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx

from tests.placer.service.api.test_serve_cli import _free_port
from tests.placer.service.meshes import full_mesh

#: The server's graceful wait for open requests (placer.service.http.HttpLimits, 10 s) and the
#: service's stop (kill the children, record their jobs: ~1 s), with room for a loaded host.
STOP_BOUND_S = 15.0


def _wait_until(predicate, timeout_s: float, what: str, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
            if value:
                return value
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.log.read_text()
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _solve_job(url: str) -> tuple[str, str | None]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return tuple(conn.execute(text("SELECT status, error FROM solve_jobs WHERE id = 1")).one())
    finally:
        engine.dispose()


def test_sigterm_stops_the_service_within_its_bound_with_a_solve_running(tmp_path):
    port, token = _free_port(), "sigterm-test-token"
    url = f"sqlite:///{tmp_path / 'placer.db'}"
    env = {**os.environ, "PLACER_DATABASE_URL": url}
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "placer.cli", "serve", "--host", "127.0.0.1", "--port", str(port), "--token", token,
         "--no-scheduler", "--workers", "1"], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    proc.log = tmp_path / "serve.log"
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    try:
        _wait_until(lambda: httpx.get(f"{base}/healthz", timeout=2).status_code == 200, 60, "no /healthz", proc)
        # 30 datacenters in a full mesh under a 300 s limit: minutes of solving (43,200 routes, in the bound)
        body = {"scenario": full_mesh(30), "time_limit_s": 300}
        assert httpx.post(f"{base}/plans", json=body, headers=auth, timeout=30).status_code == 202
        queued = httpx.post(f"{base}/plans", json=body, headers=auth, timeout=30)  # one worker: it waits
        assert queued.status_code == 202
        _wait_until(lambda: httpx.get(f"{base}/solve-jobs/1", headers=auth, timeout=5).json()["status"] == "RUNNING",
                    30, "the solve did not start", proc)
        time.sleep(2.0)  # well into the solve's child process
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        stopped_s = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log.close()
    assert stopped_s <= STOP_BOUND_S, f"placer serve took {stopped_s:.1f} s to stop on SIGTERM"
    assert "1 running job(s) killed, marked FAILED" in proc.log.read_text()
    status, error = _solve_job(url)
    assert status == "FAILED" and error == "solve job 1: the service stopped while it ran; submit it again"
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT status FROM solve_jobs WHERE id = 2")).scalar_one() == "PENDING"
    engine.dispose()
