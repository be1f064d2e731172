"""The README's replanning chain, run as written: deploy with a request log, traffic, fit it, add the
nightly job on that log, run it now — the run replans (not SKIPPED) and applies its plan to the
deployment; every address the deploy banner prints answers; and the README's ``placer bench`` of the
deployment measures it without an error and writes a request log ``workload fit`` reads.

in:  the README's lines (found by what they do; the test fails if one is missing), a folder like
     tests/test_readme.py's (no PYTHONPATH), a free port in place of the README's :8000
out: each line exits 0; ``jobs run-now`` says INITIAL and "applied to the deployment"; the banner's
     ``/v1/completions`` answers a completion; ``deploy --apply`` without the control token names
     PLACER_EXECUTOR_TOKEN

The README's ``export NAME=VALUE`` lines are applied to every command's environment, as a user
who exported them in each terminal. The deployment is the README's plan on a local Ray
(CPU, the tiny seeded model): ~30 s to serve on two cores, ~60 s in all.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.test_readme import COMMANDS, _env, _run, _workdir

pytestmark = pytest.mark.ray

README_DEPLOY_URL = "http://127.0.0.1:8000"
REQUESTS = 25  # more than a job's min_requests (20)
SERVE_WAIT_S = 150.0


def _line(pattern: str) -> str:
    found = [c for c in COMMANDS if re.search(pattern, c)]
    assert len(found) == 1, f"the README should have one line matching {pattern!r}: {found}"
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ok(line: str, cwd: Path, env: dict) -> str:
    r = _run(line, cwd, env, timeout_s=180)
    assert r.returncode == 0 and "Traceback" not in r.stderr, f"{line!r} exited {r.returncode}:\n{r.stderr[-2000:]}"
    return r.stdout


def test_the_readmes_replanning_chain_runs_as_written(tmp_path):
    cwd, port = _workdir(tmp_path), _free_port()
    env = _env(tmp_path)
    for line in COMMANDS:
        exported = re.fullmatch(r"export (\w+)=(\S+)(?:\s+#.*)?", line)
        if exported:
            env[exported.group(1)] = exported.group(2)
    assert "PLACER_EXECUTOR_TOKEN" in env, "the README should export the deployment's control token"
    url = f"http://127.0.0.1:{port}"

    _ok(_line(r"placer optimize \S+ --json --out plan\.json"), cwd, env)
    deploy = _line(r"placer deploy plan\.json --request-log (\S+)")
    log = cwd / re.search(r"--request-log (\S+)", deploy).group(1)
    proc = subprocess.Popen(["bash", "-c", f"exec {deploy.split('#')[0]} --port {port}"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    banner: list[str] = []
    threading.Thread(target=lambda: banner.extend(proc.stdout), daemon=True).start()
    try:
        end = time.monotonic() + SERVE_WAIT_S
        while not any("serving on" in b for b in banner):
            assert proc.poll() is None, "".join(banner)[-3000:]
            assert time.monotonic() < end, "placer deploy did not serve:\n" + "".join(banner)[-3000:]
            time.sleep(0.5)
        assert f"--request-log {log.name} replans from it" in "".join(banner)  # deploy names what reads its log
        printed = [u for b in banner for u in re.findall(rf"{re.escape(url)}[^\s)]*", b)]  # not Ray's own
        assert printed, "".join(banner)
        for address in printed:  # what deploy prints: its completions endpoint, asked as its clients do
            if address.endswith("/completions"):
                answer = httpx.post(address, json={"prompt": "hello", "max_tokens": 4}, timeout=60)
            else:
                answer = httpx.get(address, timeout=60)
            assert answer.status_code == 200, (address, answer.status_code, answer.text[:300])

        for i in range(REQUESTS):  # the traffic the request log records
            served = httpx.post(f"{url}/v1/completions", json={"prompt": f"request {i}: " + "tell me more " * (i % 7),
                                                               "max_tokens": 4 + i % 5}, timeout=60)
            assert served.status_code == 200, served.text[:300]
        end = time.monotonic() + 15
        while not log.is_file() or len(log.read_text().splitlines()) < REQUESTS:
            held = len(log.read_text().splitlines()) if log.is_file() else 0
            assert time.monotonic() < end, f"{log.name} holds {held} of {REQUESTS} requests"
            time.sleep(0.5)

        bench = _line(r"placer bench ")  # the README's bench of the deployment, its log read back
        measured = _ok(bench.replace(README_DEPLOY_URL, url), cwd, env)
        assert "ttft_p90_s" in measured, measured
        bench_log = cwd / re.search(r"--request-log (\S+)", bench).group(1)
        asked = int(re.search(r"--requests (\d+)", bench).group(1))
        records = [json.loads(line) for line in bench_log.read_text().splitlines()]
        assert len(records) == asked and not [r["error"] for r in records if r.get("error")], measured
        assert "classes" in _ok(f".venv/bin/placer workload fit {bench_log.name}", cwd, env)

        fitted = _ok(_line(rf"placer workload fit {re.escape(log.name)}"), cwd, env)
        assert "classes" in fitted, fitted
        add = _line(r"placer jobs add ")
        assert f"--request-log {log.name}" in add, "the job should read what deploy logged"
        _ok(add.replace(README_DEPLOY_URL, url), cwd, env)
        ran = _ok(_line(r"placer jobs run-now "), cwd, env)
        assert "SKIPPED" not in ran and "INITIAL" in ran and f"applied to the deployment at {url}" in ran, ran

        no_token = {k: v for k, v in env.items() if k != "PLACER_EXECUTOR_TOKEN"}
        refused = _run(f".venv/bin/placer deploy --apply plan.json --url {url}", cwd, no_token)
        assert refused.returncode == 1 and "PLACER_EXECUTOR_TOKEN" in refused.stderr, refused.stderr
        assert "For more information" not in refused.stderr
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
