"""`placer deploy FLEET.json` for real: a local Ray, each model's actors and router, one HTTP front.

Marked `ray`. The command runs as an operator runs it (a subprocess serving on a port until
Ctrl-C). Kept small for a 2-core machine: chat is P in dc-a + MD in dc-b (its KV crosses the
shared line), code one aggregated A instance in dc-a; both serve the tiny seeded model, chat
with seed 0 and code with seed 1 (`--seed` + the model's index), so each model's reply is
checked against its own reference engine — a request answered by the other model's instances
would not match. The fleet's live change goes through the chips the models share on Ray: a second
chat MD finds none free on the emulated node and is refused with nothing stopped; a change of the
models served is a 501.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray")
httpx = pytest.importorskip("httpx")

from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams

pytestmark = [pytest.mark.ray, pytest.mark.timeout(150)]

FLEET = {
    "scenario": "tiny-fleet",
    "pools": [{"model": "chat", "role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
              {"model": "chat", "role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1},
              {"model": "code", "role": "A", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 1.0}]}
TOKEN = "fleet-ray-test-token"
PROMPT = [256, *b"pack my box with five dozen liquor jugs"]
N = 24


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"placer deploy exited {proc.returncode}: {proc.stdout.read()}")
        try:
            if httpx.get(f"{url}/health", timeout=2).json()["status"] == "ok":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail("the fleet did not become healthy in time")


def test_placer_deploy_serves_a_fleet_on_ray_each_model_by_its_own_instances(tmp_path):
    sampling = SamplingParams(max_new_tokens=N, stop_at_eos=False)
    engine = EngineConfig(backend="torch")  # the command's engine settings (block size does not change outputs)
    expected = {name: Engine.from_seed(ModelConfig(), engine, seed=seed, device="cpu").generate(PROMPT, N, sampling)
                for name, seed in (("chat", 0), ("code", 1))}
    assert expected["chat"] != expected["code"]
    plan = tmp_path / "fleet.json"
    plan.write_text(json.dumps(FLEET))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PLACER_EXECUTOR_TOKEN": TOKEN}
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "placer.cli", "deploy", str(plan), "--port", str(port),
                             "--device", "cpu", "--num-blocks", "256", "--request-log", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        _wait_healthy(proc, url, 100)
        for name in ("chat", "code"):
            r = httpx.post(f"{url}/v1/completions", json={"model": name, "prompt": PROMPT, "max_tokens": N,
                                                          "ignore_eos": True}, timeout=60)
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["token_ids"] == expected[name]
            assert all(i.startswith(f"{name}.") for i in r.json()["placer"]["instances"].values())
        unknown = httpx.post(f"{url}/v1/completions", json={"model": "poetry", "prompt": "hi"}, timeout=10)
        assert unknown.status_code == 404 and "chat, code" in unknown.text
        text = httpx.get(f"{url}/metrics", params={"format": "prometheus"}, timeout=10).text
        assert 'placer_requests_completed_total{model="chat"} 1' in text
        assert 'placer_requests_completed_total{model="code"} 1' in text
        only_chat = {**FLEET, "pools": [p for p in FLEET["pools"] if p["model"] == "chat"]}
        change = httpx.post(f"{url}/plan", json=only_chat, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert change.status_code == 501 and "changing the models served" in change.text
        # a second chat MD: the emulated dc-b node holds exactly the plan's chips (shared by the models), so the
        # fleet's change is refused for want of chip:B before anything stops
        pools = [{**p, "count": 2} if (p["model"], p["role"]) == ("chat", "MD") else p for p in FLEET["pools"]]
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/plan", json={**FLEET, "pools": pools}, headers=auth, timeout=10).status_code == 202
        status = httpx.get(f"{url}/plan/status", headers=auth, timeout=10).json()
        for _ in range(100):
            if status["state"] != "applying":
                break
            time.sleep(0.1)
            status = httpx.get(f"{url}/plan/status", headers=auth, timeout=10).json()
        assert status["state"] == "failed" and "needs chip:B=1, dc:dc-b=1 more than the cluster has" in status["error"], status
        health = httpx.get(f"{url}/health", timeout=10).json()
        assert health["models"]["chat"]["instances"] == {"P": 1, "MD": 1}  # nothing changed
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert "fleet plan 'tiny-fleet': 2 models, 3 instances" in out
    assert "serving chat, code on" in out
    records = [json.loads(line) for line in log.read_text().splitlines()]  # one log, each record's model
    assert sorted(r["extra"]["model"] for r in records) == ["chat", "code"]
    assert all(i.startswith(f"{r['extra']['model']}.") for r in records for i in r["extra"]["instances"].values())
