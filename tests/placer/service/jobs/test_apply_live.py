"""A replanning job in `apply` mode drives a running deployment end to end: the adopted
plan goes over HTTP to the executor's server, which changes its instances live."""

from __future__ import annotations

import pytest

from db import repo
from db.models import RunOutcome
from placer.service.jobs import runner
from tests.placer.service.jobs.support import add_job
from tests.support import live_server

pytest.importorskip("torch")


@pytest.fixture
def deployment(monkeypatch):
    """A two-datacenter deployment (one P, one MD of a tiny seeded model) behind a real server;
    its control plane's token is the one the service's jobs send (PLACER_EXECUTOR_TOKEN)."""
    monkeypatch.setenv("PLACER_EXECUTOR_TOKEN", "apply-live-token")
    import torch

    from executor.cluster import LocalCluster
    from executor.engine import EngineConfig, ModelConfig
    from executor.placement import InstanceSpec
    from executor.server import create_app

    torch.set_num_threads(1)
    model = ModelConfig(num_layers=2, hidden_size=64, num_q_heads=4, num_kv_heads=2, head_dim=16,
                        intermediate_size=128)
    start = [InstanceSpec("p-dc-a-h100-sxm-tp1-0", "P", "dc-a", "H100-SXM", 1),
             InstanceSpec("md-dc-b-l40s-tp1-0", "MD", "dc-b", "L40S", 1)]
    cluster = LocalCluster(start, model, EngineConfig(backend="torch", block_size=4, num_blocks=256),
                           transport="fake", threads=True)
    try:
        with live_server(create_app(cluster.router, deployment=cluster, token="apply-live-token")) as url:
            yield cluster, url
    finally:
        cluster.close()


def test_an_apply_job_moves_the_running_deployment_to_the_adopted_plan(factory, trace, deployment):
    from executor.placement import placement

    cluster, url = deployment
    job_id = add_job(factory, trace, mode="apply", deploy_url=url, min_bcr_gain_pct=0.0)
    run_id, outcome = runner.run_now(factory, job_id)
    assert outcome == RunOutcome.INITIAL
    with factory() as s:
        run = repo.get_run(s, run_id)
        plan = repo.get_plan(s, run.plan_id).plan
    assert f"applied to the deployment at {url}" in run.reason
    from placer.plan import Plan

    wanted = sorted(spec.name for spec in placement(Plan.model_validate(plan)))
    assert sorted(cluster.router.instances) == wanted


def test_an_unreachable_deployment_fails_the_run_and_the_plan_is_not_adopted(factory, trace):
    job_id = add_job(factory, trace, mode="apply", deploy_url="http://127.0.0.1:9", min_bcr_gain_pct=0.0)
    run_id, outcome = runner.run_now(factory, job_id)
    assert outcome is None
    with factory() as s:
        run = repo.get_run(s, run_id)
        assert run.status.value == "FAILED" and "applying it to http://127.0.0.1:9 failed" in run.error
        assert "Not adopted" in run.error and run.plan_id is not None  # the plan is kept for a look
        assert repo.get_job(s, job_id).current_plan_id is None
        assert repo.list_deployments(s, job_id)[1] == 0


def test_a_job_without_the_deployments_token_fails_naming_the_variable_that_carries_it(
        factory, trace, deployment, monkeypatch):
    """Both ways a deployment refuses a job's missing token (applying its first plan; asking what
    runs before a later one) name PLACER_EXECUTOR_TOKEN, never an HTTP library's raw error."""
    _, url = deployment
    monkeypatch.delenv("PLACER_EXECUTOR_TOKEN")
    job_id = add_job(factory, trace, mode="apply", deploy_url=url, min_bcr_gain_pct=0.0)
    run_id, _ = runner.run_now(factory, job_id)
    with factory() as s:
        first = repo.get_run(s, run_id).error
    monkeypatch.setenv("PLACER_EXECUTOR_TOKEN", "apply-live-token")
    adopted, outcome = runner.run_now(factory, job_id)
    assert outcome == RunOutcome.INITIAL
    monkeypatch.delenv("PLACER_EXECUTOR_TOKEN")
    run_id, _ = runner.run_now(factory, job_id)
    with factory() as s:
        later = repo.get_run(s, run_id).error
    for error in (first, later):
        assert error and "refused the job (401" in error and "PLACER_EXECUTOR_TOKEN" in error, error
        assert "For more information" not in error and "httpx" not in error.lower(), error
