"""`placer serve` in its own process: it migrates a fresh database, serves, enforces the token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_placer_serve_starts_on_a_fresh_database(tmp_path):
    port, token = _free_port(), "serve-test-token"
    db = tmp_path / "data" / "placer.db"
    env = {**os.environ, "PLACER_DATABASE_URL": f"sqlite:///{db}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "placer.cli", "serve", "--port", str(port), "--token", token, "--no-scheduler"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "placer serve did not come up"
                time.sleep(0.2)
        assert health.json() == {"status": "ok", "database": "ok", "scheduler": "off"}
        assert db.is_file()
        assert httpx.get(f"http://127.0.0.1:{port}/scenarios").status_code == 401
        ok = httpx.get(f"http://127.0.0.1:{port}/scenarios", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.json()["total"] == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
