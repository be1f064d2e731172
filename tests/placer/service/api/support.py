"""Helpers of the API tests: settings, polling, a real uvicorn server on a free port."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import live_server as serve

TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def make_settings(url: str, **changes):
    from placer.service.api import Settings

    return Settings(**{"token": TOKEN, "database_url": url, "scheduler": False, **changes})


def wait_solve(client, job_id: int, timeout_s: float = 60.0) -> dict:
    """Poll a solve job until it is SUCCEEDED or FAILED."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get(f"/solve-jobs/{job_id}").json()
        if job["status"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def wait_run(client, job_id: int, run_id: int, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        run = client.get(f"/jobs/{job_id}/runs/{run_id}").json()
        if run["status"] in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
            return run
        time.sleep(0.05)


def solved_plan(client, body: dict) -> tuple[dict, dict]:
    """POST /plans, wait, and return (the finished job, the plan JSON)."""
    response = client.post("/plans", json=body)
    assert response.status_code == 202, response.text
    job = wait_solve(client, response.json()["id"])
    assert job["status"] == "SUCCEEDED", job
    return job, client.get(f"/plans/{job['plan_id']}").json()


@contextmanager
def live_server(settings) -> Iterator[str]:
    """Serve ``create_app(settings)`` with uvicorn on a free port in a thread; yields its URL."""
    from placer.service.api import create_app

    with serve(create_app(settings)) as url:
        yield url