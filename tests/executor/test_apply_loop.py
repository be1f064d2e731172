"""The closed loop end to end, in process: a deployment serves requests over HTTP and logs them
(to a file and to the database); a replanning job fits them, re-solves, applies the new plan to
the running deployment through its server, and the next run says UNCHANGED. An apply that fails
is recorded FAILED, the plan not adopted and the deployment left on its old plan."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from db import repo
from db.models import DeploymentStatus, RunOutcome, RunStatus
from db.session import session_scope
from executor.cluster import LocalCluster
from executor.placement import placement
from executor.request_log import BatchingRequestLog, DbSink, JsonlSink
from executor.server import create_app
from placer.cli import app as placer_app
from placer.optimize import optimize
from placer.service.jobs import runner
from placer.service.jobs.deployment import running_differs
from placer.service.store import save_plan
from placer.specs import parse_scenario
from tests.db.support import two_dc
from tests.support import live_server

REQUESTS = 30


class Both:
    """Log to the file and to the database at once (a deployment picks one; the test wants both)."""

    def __init__(self, *sinks):
        self.sinks = sinks

    def write(self, records):
        for sink in self.sinks:
            sink.write(records)

    def close(self):
        for sink in self.sinks:
            sink.close()


@pytest.fixture
def loop(tmp_path, model_config, engine_config):
    """The job's database, the old plan (solved for long prompts) stored and running, its server's URL."""
    import db

    db_url = f"sqlite:///{tmp_path / 'placer.db'}"
    engine, factory = db.connect(db_url)
    old = optimize(parse_scenario(two_dc()))
    with session_scope(factory) as s:
        scenario = repo.create_scenario(s, two_dc())
        old_id = save_plan(s, old, inputs={}, scenario_id=scenario.id, source="cli").id
        scenario_id = scenario.id
    log = BatchingRequestLog(Both(JsonlSink(tmp_path / "reqlog.jsonl"), DbSink(db_url)), batch_size=8)
    cluster = LocalCluster(placement(old), model_config, engine_config, transport="fake", threads=True,
                           request_log=log)
    try:
        with live_server(create_app(cluster.router, deployment=cluster)) as url:
            yield factory, cluster, url, old, old_id, scenario_id
    finally:
        cluster.close()
        log.close()
        engine.dispose()


def _serve(url: str) -> None:
    with httpx.Client(timeout=60) as client:
        for k in range(REQUESTS):
            r = client.post(f"{url}/v1/completions", json={"prompt": f"request {k}: tell me about the weather",
                                                           "max_tokens": 8, "ignore_eos": True})
            assert r.status_code == 200, r.text


def _running(cluster) -> list[str]:
    return sorted(cluster.router.instances)


def _run(factory, job_id):
    run_id, outcome = runner.run_now(factory, job_id)
    with factory() as s:
        run = repo.get_run(s, run_id)
        return outcome, run.status, run.reason, run.error, run.plan_id, repo.get_job(s, job_id).current_plan_id


def test_serve_log_fit_replan_apply_and_the_next_run_is_unchanged(loop, tmp_path):
    factory, cluster, url, old, old_id, scenario_id = loop
    _serve(url)
    cluster.router.request_log.flush()

    fitted = CliRunner().invoke(placer_app, ["workload", "fit", str(tmp_path / "reqlog.jsonl")])
    assert fitted.exit_code == 0, fitted.output
    workload = yaml.safe_load(fitted.output.split("\n", 1)[1])["workload"]
    assert sum(c["share"] for c in workload["classes"]) == pytest.approx(1.0)
    assert all(c["output_tokens"] == 8 and 30 <= c["input_tokens"] <= 40 for c in workload["classes"])
    (tmp_path / "two-dc.yaml").write_text(yaml.safe_dump(two_dc()))
    (tmp_path / "old.json").write_text(old.to_json())
    replayed = CliRunner().invoke(placer_app, ["simulate", str(tmp_path / "two-dc.yaml"), str(tmp_path / "old.json"),
                                               "--trace", str(tmp_path / "reqlog.jsonl"), "--json"])
    assert replayed.exit_code == 0, replayed.output  # the simulator replays the served requests too
    assert json.loads(replayed.stdout)["requests"] == REQUESTS

    with session_scope(factory) as s:
        job_id = repo.create_job(
            s, name="loop", scenario_id=scenario_id, schedule={"kind": "manual"},
            workload={"kind": "trace", "path": str(tmp_path / "reqlog.jsonl")}, current_plan_id=old_id,
            policy={"mode": "apply", "min_bcr_gain_pct": 0.0, "deploy_url": url, "apply_timeout_s": 0.001},
            objective="bcr", solver="ortools", time_limit_s=20.0).id

    # an apply that cannot finish in its limit: FAILED, not adopted, the old plan still runs
    outcome, status, _, error, plan_id, current = _run(factory, job_id)
    assert (outcome, status) == (None, RunStatus.FAILED)
    assert "never became ready" in error and "Not adopted" in error and current == old_id and plan_id
    assert _running(cluster) == sorted(s.name for s in placement(old))
    assert httpx.get(f"{url}/plan/status").json()["state"] == "failed"

    with session_scope(factory) as s:
        job = repo.get_job(s, job_id)
        job.policy = {**job.policy, "apply_timeout_s": 120.0}
    outcome, status, reason, _, new_id, current = _run(factory, job_id)
    assert outcome == RunOutcome.ADOPTED and current == new_id != old_id
    assert "applied to the deployment" in reason and "make-before-break" in reason
    with factory() as s:
        new = runner.parse_plan(repo.get_plan(s, new_id).plan)
        [dep], _ = repo.list_deployments(s, job_id)
        assert dep.plan_id == new_id and dep.status == DeploymentStatus.ACTIVE
    assert _running(cluster) == sorted(s.name for s in placement(new)) != sorted(s.name for s in placement(old))
    assert running_differs(url, new) is None and "runs" in running_differs(url, old)
    assert httpx.post(f"{url}/v1/completions", json={"prompt": "after", "max_tokens": 3}).status_code == 200

    outcome, status, reason, _, _, current = _run(factory, job_id)  # from the file again
    assert outcome == RunOutcome.UNCHANGED and current == new_id, reason

    cluster.router.request_log.flush()
    with session_scope(factory) as s:  # the same requests, from the database
        repo.get_job(s, job_id).workload = {"kind": "request_log", "window_s": 3600.0, "min_requests": REQUESTS}
    outcome, status, reason, _, _, current = _run(factory, job_id)
    assert outcome == RunOutcome.UNCHANGED and current == new_id, reason
    with factory() as s:
        [last], _ = repo.list_runs(s, job_id, limit=1)
        assert last.workload["requests"] == REQUESTS + 1  # the 30 and the one after the change
    assert _running(cluster) == sorted(s.name for s in placement(new))

    # someone puts the old plan back behind the job's back: the next run sees it and re-applies
    assert httpx.post(f"{url}/plan", json=old.model_dump(mode="json"), params={"grace_s": 5}).status_code == 202
    while httpx.get(f"{url}/plan/status").json()["state"] == "applying":
        time.sleep(0.05)
    assert _running(cluster) == sorted(s.name for s in placement(old))
    outcome, status, reason, _, _, current = _run(factory, job_id)
    assert outcome == RunOutcome.UNCHANGED and current == new_id
    assert f"did not run the job's current plan {new_id}" in reason and "applied to the deployment" in reason
    assert _running(cluster) == sorted(s.name for s in placement(new))
