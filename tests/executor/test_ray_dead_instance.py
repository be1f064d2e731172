"""A SIGKILLed instance on local Ray: `/health` names it, and a plan change replaces it (marked `ray`).

Issue 43: after an MD actor's worker process was SIGKILLed, `/health` still said ok and
`placer deploy --apply` of the running plan "kept" the dead instance (nothing to do), so the
deployment went on without a decoder. Now the router's heartbeats mark it DOWN within
`down_after` × `heartbeat_s` (2 s at the defaults), `/health` says degraded and names it, and the
apply stops it and starts it again: the deployment serves once more.
"""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import pytest

ray = pytest.importorskip("ray")

from typer.testing import CliRunner

from executor.config import ServingConfig
from executor.deploy import RayDeployment, start_local_ray
from executor.engine import EngineConfig, ModelConfig
from executor.placement import placement
from executor.server import create_app
from placer.plan import Plan
from tests.support import live_server

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]
TOKEN = "dead-instance-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PLAN = Plan.model_validate({"scenario": "two-dc", "pools": [
    {"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
    {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1}]})
MD = "md-dc-b-B-tp1-0"


def _health_within(url: str, bound_s: float, want: str) -> tuple[dict, float]:
    """The first /health body whose status is `want` within `bound_s`, and when it came."""
    t0 = time.monotonic()
    while True:
        body = httpx.get(f"{url}/health", timeout=10).json()
        if body["status"] == want or time.monotonic() - t0 > bound_s:
            return body, time.monotonic() - t0
        time.sleep(0.1)


def test_a_sigkilled_md_is_reported_down_and_replaced_by_apply(tmp_path):
    from placer.cli import app as placer_app

    start_local_ray(placement(PLAN), num_cpus=2, object_store_bytes=100 * 1024 * 1024)
    dep = None
    try:
        config = ServingConfig.from_plan(PLAN)
        dep = RayDeployment(PLAN, ModelConfig(), EngineConfig(backend="torch", block_size=4, num_blocks=256),
                            config, start_timeout_s=60)
        with live_server(create_app(dep.router, deployment=dep, token=TOKEN)) as url:
            assert httpx.get(f"{url}/health", timeout=10).json() == {"status": "ok", "instances": {"P": 1, "MD": 1}}
            pid = ray.get(dep.actors[MD].__ray_call__.remote(lambda actor: os.getpid()), timeout=30)
            os.kill(pid, signal.SIGKILL)  # the worker process dies; nobody tells the router

            bound_s = dep.router.health.down_after * config.heartbeat_s + 2.0  # heartbeats, plus a tick and slack
            body, took = _health_within(url, bound_s, "degraded")
            assert body == {"status": "degraded", "instances": {"P": 1}, "down": [MD]}, (body, took)

            plan_file = tmp_path / "plan.json"
            plan_file.write_text(json.dumps(PLAN.model_dump(mode="json")))
            result = CliRunner(env={"PLACER_EXECUTOR_TOKEN": TOKEN}).invoke(
                placer_app, ["deploy", "--apply", str(plan_file), "--url", url, "--grace-s", "1"])
            assert result.exit_code == 0, result.output
            report = httpx.get(f"{url}/plan/status", timeout=30, headers=AUTH).json()["report"]
            assert MD not in report["keep"] and MD in report["add"] and report["joined"] == [MD], report

            assert _health_within(url, 10, "ok")[0] == {"status": "ok", "instances": {"P": 1, "MD": 1}}
            served = httpx.post(f"{url}/v1/completions", json={"prompt": "hello", "max_tokens": 4}, timeout=120)
            assert served.status_code == 200 and len(served.json()["choices"][0]["token_ids"]) == 4
    finally:
        if dep is not None:
            dep.close()
        ray.shutdown()
