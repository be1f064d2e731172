"""A live plan change on local Ray where the new plan needs the chips the old one holds.

The emulated node carries exactly the old plan's chips (as in the issue: make-before-break
would leave the new actors PENDING), so the change drains first (break-before-make) and
`GET /plan/status` says so; a plan beyond the node's chips is refused by `placer deploy --apply`
with exit 1 and the reason, and the deployment keeps running. And the closed loop on Ray:
serve, log, replan, apply (break-before-make), UNCHANGED next. Marked `ray`.
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
TOKEN = "apply-ray-token"  # the control plane's; `placer deploy --apply` and the job read PLACER_EXECUTOR_TOKEN
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _plan(pools) -> Plan:
    return Plan.model_validate({"scenario": "two-dc", "pools": [
        {"role": role, "datacenter": dc, "chip": chip, "tp": tp, "count": n} for role, dc, chip, tp, n in pools]})


OLD = _plan([("P", "dc-a", "A", 1, 1), ("RLD", "dc-a", "A", 1, 1), ("MD", "dc-b", "B", 1, 1)])
NEW = _plan([("P", "dc-a", "A", 2, 1), ("MD", "dc-b", "B", 1, 1)])  # the two A chips the old P and RLD hold
TOO_BIG = _plan([("P", "dc-a", "A", 2, 2), ("MD", "dc-b", "B", 1, 1)])


def _wait(url: str) -> dict:
    end = time.monotonic() + 240
    while (status := httpx.get(f"{url}/plan/status", timeout=30, headers=AUTH).json())["state"] == "applying":
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
        with live_server(create_app(dep.router, deployment=dep, token=TOKEN)) as url:
            assert httpx.post(f"{url}/plan", json=NEW.model_dump(mode="json"), params={"grace_s": 5},
                              timeout=30, headers=AUTH).status_code == 202
            status = _wait(url)
            assert status["state"] == "succeeded", status
            assert status["strategy"] == "break-before-make" and "chip:A=2" in status["strategy_reason"]
            steps = [(e["instance"], e["event"]) for e in status["events"]]
            assert steps.index(("p-dc-a-A-tp1-0", "stopped")) < steps.index(("p-dc-a-A-tp2-0", "joined"))
            assert sorted(i["name"] for i in httpx.get(f"{url}/instances", headers=AUTH).json()) == \
                sorted(s.name for s in placement(NEW))
            served = httpx.post(f"{url}/v1/completions", json={"prompt": "hello", "max_tokens": 4}, timeout=120)
            assert served.status_code == 200 and len(served.json()["choices"][0]["token_ids"]) == 4

            too_big = tmp_path / "too-big.json"
            too_big.write_text(json.dumps(TOO_BIG.model_dump(mode="json")))
            result = CliRunner(env={"PLACER_EXECUTOR_TOKEN": TOKEN}).invoke(
                placer_app, ["deploy", "--apply", str(too_big), "--url", url])
            assert result.exit_code == 1 and "more than the cluster has" in result.output, result.output
            assert sorted(i["name"] for i in httpx.get(f"{url}/instances", headers=AUTH).json()) == \
                sorted(s.name for s in placement(NEW))
            assert dep.plan is NEW or dep.plan.model_dump() == NEW.model_dump()
    finally:
        if dep is not None:
            dep.close()
        ray.shutdown()


def test_the_closed_loop_on_local_ray(tmp_path, monkeypatch):
    """serve on Ray → log (file and db) → replan → apply (the new plan needs chips the old one
    holds: break-before-make) → the deployment runs the new plan → the next run is UNCHANGED."""
    monkeypatch.setenv("PLACER_EXECUTOR_TOKEN", TOKEN)  # what the job's deployment client sends
    import db
    from db import repo
    from db.models import RunOutcome
    from db.session import session_scope
    from executor.request_log import BatchingRequestLog, DbSink, JsonlSink
    from placer.optimize import optimize
    from placer.service.jobs import runner
    from placer.service.store import save_plan
    from placer.specs import parse_scenario
    from placer.workload.trace import read_trace
    from tests.db.support import two_dc
    from tests.executor.test_apply_loop import Both

    db_url = f"sqlite:///{tmp_path / 'placer.db'}"
    engine, factory = db.connect(db_url)
    old = optimize(parse_scenario(two_dc()))  # long prompts: 5 instances holding every chip of the node
    with session_scope(factory) as s:
        scenario_id = repo.create_scenario(s, two_dc()).id
        old_id = save_plan(s, old, inputs={}, scenario_id=scenario_id, source="cli").id
    log = BatchingRequestLog(Both(JsonlSink(tmp_path / "reqlog.jsonl"), DbSink(db_url)), batch_size=8)
    start_local_ray(placement(old), num_cpus=2, object_store_bytes=100 * 1024 * 1024)
    dep = None
    try:
        dep = RayDeployment(old, ModelConfig(), EngineConfig(backend="torch", block_size=4, num_blocks=256),
                            ServingConfig.from_plan(old), request_log=log, start_timeout_s=90)
        with live_server(create_app(dep.router, deployment=dep, token=TOKEN)) as url:
            for k in range(24):
                r = httpx.post(f"{url}/v1/completions", json={"prompt": f"request {k}: hello", "max_tokens": 4},
                               timeout=120)
                assert r.status_code == 200, r.text
            log.flush()
            with session_scope(factory) as s:
                job_id = repo.create_job(
                    s, name="ray-loop", scenario_id=scenario_id, schedule={"kind": "manual"},
                    workload={"kind": "request_log", "window_s": 3600.0, "min_requests": 20},
                    current_plan_id=old_id, objective="bcr", solver="ortools", time_limit_s=20.0,
                    policy={"mode": "apply", "min_bcr_gain_pct": 0.0, "deploy_url": url, "apply_timeout_s": 240.0}).id
            run_id, outcome = runner.run_now(factory, job_id)
            with factory() as s:
                run = repo.get_run(s, run_id)
                assert outcome == RunOutcome.ADOPTED, run.error
                assert "break-before-make" in run.reason
                new = runner.parse_plan(repo.get_plan(s, run.plan_id).plan)
            assert sorted(i["name"] for i in httpx.get(f"{url}/instances", headers=AUTH).json()) == \
                sorted(sp.name for sp in placement(new))
            # the deployment wrote the same 24 requests to its JSONL file as to the database
            assert len(list(read_trace(tmp_path / "reqlog.jsonl"))) == 24
            # the next run sees the same requests (a little later: a rate no higher), so the plan just
            # adopted stays. (Read from the file instead, the rate is (n − 1)/(last − first), 3-4 % above
            # the log's n/(now − first) here: a different workload, for which the plan has no headroom.)
            run2, outcome = runner.run_now(factory, job_id)
            with factory() as s:
                assert outcome == RunOutcome.UNCHANGED, repo.get_run(s, run2).reason
            assert httpx.post(f"{url}/v1/completions", json={"prompt": "after", "max_tokens": 4},
                              timeout=120).status_code == 200
    finally:
        if dep is not None:
            dep.close()
        ray.shutdown()
        log.close()
        engine.dispose()
