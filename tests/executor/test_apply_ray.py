"""A live plan change on local Ray where the new plan needs the chips the old one holds.

The emulated node carries exactly the old plan's chips (as in the issue: make-before-break
would leave the new actors PENDING), so the change drains first (break-before-make) and
`GET /plan/status` says so; a plan beyond the node's chips is refused by `placer deploy --apply`
with exit 1 and the reason, and the deployment keeps running. Marked `ray`.
"""

from __future__ import annotations

import json
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


def _plan(pools) -> Plan:
    return Plan.model_validate({"scenario": "two-dc", "pools": [
        {"role": role, "datacenter": dc, "chip": chip, "tp": tp, "count": n} for role, dc, chip, tp, n in pools]})


OLD = _plan([("P", "dc-a", "A", 1, 1), ("RLD", "dc-a", "A", 1, 1), ("MD", "dc-b", "B", 1, 1)])
NEW = _plan([("P", "dc-a", "A", 2, 1), ("MD", "dc-b", "B", 1, 1)])  # the two A chips the old P and RLD hold
TOO_BIG = _plan([("P", "dc-a", "A", 2, 2), ("MD", "dc-b", "B", 1, 1)])


def _wait(url: str) -> dict:
    end = time.monotonic() + 240
    while (status := httpx.get(f"{url}/plan/status", timeout=30).json())["state"] == "applying":
        assert time.monotonic() < end, status
        time.sleep(0.2)
    return status


def test_a_plan_that_needs_the_old_plans_chips_drains_first_on_ray(tmp_path):
    from placer.cli import app as placer_app

    start_local_ray(placement(OLD), num_cpus=2, object_store_bytes=100 * 1024 * 1024)
    dep = None
    try:
        dep = RayDeployment(OLD, ModelConfig(), EngineConfig(backend="torch", block_size=4, num_blocks=256),
                            ServingConfig.from_plan(OLD), start_timeout_s=60)
        with live_server(create_app(dep.router, deployment=dep)) as url:
            assert httpx.post(f"{url}/plan", json=NEW.model_dump(mode="json"), params={"grace_s": 5},
                              timeout=30).status_code == 202
            status = _wait(url)
            assert status["state"] == "succeeded", status
            assert status["strategy"] == "break-before-make" and "chip:A=2" in status["strategy_reason"]
            steps = [(e["instance"], e["event"]) for e in status["events"]]
            assert steps.index(("p-dc-a-A-tp1-0", "stopped")) < steps.index(("p-dc-a-A-tp2-0", "joined"))
            assert sorted(i["name"] for i in httpx.get(f"{url}/instances").json()) == \
                sorted(s.name for s in placement(NEW))
            served = httpx.post(f"{url}/v1/completions", json={"prompt": "hello", "max_tokens": 4}, timeout=120)
            assert served.status_code == 200 and len(served.json()["choices"][0]["token_ids"]) == 4

            too_big = tmp_path / "too-big.json"
            too_big.write_text(json.dumps(TOO_BIG.model_dump(mode="json")))
            result = CliRunner().invoke(placer_app, ["deploy", "--apply", str(too_big), "--url", url])
            assert result.exit_code == 1 and "more than the cluster has" in result.output, result.output
            assert sorted(i["name"] for i in httpx.get(f"{url}/instances").json()) == \
                sorted(s.name for s in placement(NEW))
            assert dep.plan is NEW or dep.plan.model_dump() == NEW.model_dump()
    finally:
        if dep is not None:
            dep.close()
        ray.shutdown()
