"""Elastic plans: diff a running deployment against a new plan and apply it while requests stream."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from executor.cluster import LocalCluster
from executor.elastic import diff_specs
from executor.engine import Engine, EngineConfig, SamplingParams
from executor.placement import InstanceSpec, placement
from executor.routing import Pipeline, RoutingPolicy
from executor.server import create_app
from placer.pdd import FilterRule
from placer.plan import Plan
from tests.executor.support import serving

P0, RLD0 = InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("rld0", "RLD", "dc-a", "A")
MD0, MD1 = InstanceSpec("md0", "MD", "dc-b", "B"), InstanceSpec("md1", "MD", "dc-b", "B")
PROMPTS = [[256, *f"request {k}: the quick brown fox".encode()] for k in range(24)]
N = 12

TOKEN = "elastic-control-token"  # the control plane needs one (docs/security.md)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _sampling(n: int = N) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, stop_at_eos=False)


@pytest.fixture
def engine_config() -> EngineConfig:
    return EngineConfig(backend="torch", block_size=4, num_blocks=512)


@pytest.fixture
def reference(model_config, engine_config):
    engine = Engine.from_seed(model_config, engine_config, seed=0, device="cpu")
    return lambda prompt, n=N: engine.generate(prompt, n, _sampling(n))


def test_diff_matches_instances_by_name_and_replaces_changed_ones():
    moved = InstanceSpec("md0", "MD", "dc-c", "B")
    d = diff_specs([P0, RLD0, MD0], [P0, moved, MD1])
    assert d.keep == ["p0"] and [s.name for s in d.add] == ["md0", "md1"] and d.remove == ["rld0", "md0"]
    assert diff_specs([P0], [P0]).empty


def test_live_plan_change_adds_an_md_and_removes_an_rld_with_zero_lost_requests(model_config, engine_config,
                                                                                  reference):
    policy = RoutingPolicy(direct_min_hit_rate=0.99,
                           filter_rule=FilterRule(1, 1.0, N // 2 + 1))  # half the requests filtered → RLD
    c = LocalCluster([P0, RLD0, MD0], model_config, engine_config, serving(routing=policy), transport="fake",
                     threads=True)
    streams, done = [], threading.Event()

    def client():
        for k, prompt in enumerate(PROMPTS):
            streams.append((prompt, n := N // 2 if k % 2 else N, c.router.submit(prompt, _sampling(n))))
            if k == len(PROMPTS) // 3:
                done.set()  # the change starts with requests in flight
            threading.Event().wait(0.01)

    try:
        t = threading.Thread(target=client)
        t.start()
        assert done.wait(30)
        report = c.apply_plan([P0, MD0, MD1], grace_s=10)
        t.join(30)
        for _, _, s in streams:
            assert s.closed.wait(30)
        assert report.joined == ["md1"] and report.not_ready == []
        assert report.drained + list(report.evacuated) == ["rld0"]
        assert len(streams) == len(PROMPTS)
        assert [s.error for _, _, s in streams] == [None] * len(PROMPTS)  # zero lost
        assert all(s.result() == reference(p, n) for p, n, s in streams)
        assert sorted(c.instances) == ["md0", "md1", "p0"] and "rld0" not in c.router.instances
        late = c.router.submit(PROMPTS[0], _sampling())
        assert late.result(30) == reference(PROMPTS[0]) and "rld0" not in late.record.extra["instances"].values()
        fresh = [[256, *f"{k}: after the change".encode()] for k in range(4)]  # no shared block
        after = [c.router.submit(p, _sampling()) for p in fresh]  # at once: spread by load
        assert [s.result(30) for s in after] == [reference(p) for p in fresh]
        assert "md1" in {s.record.extra["instances"].get("MD") for s in after}  # the new MD serves
    finally:
        c.close()


def test_a_leaving_instance_past_its_grace_hands_its_requests_over_cleanly(model_config, engine_config, reference):
    only_relay = RoutingPolicy(allowed=frozenset({Pipeline.P_RLD}), filter_rule=FilterRule(1, 1.0, 10**6))
    c = LocalCluster([P0, RLD0, InstanceSpec("rld1", "RLD", "dc-a", "A")], model_config, engine_config,
                     serving(routing=only_relay), transport="fake", threads=False)
    try:
        stream = c.router.submit(PROMPTS[0], _sampling(40))
        holder = c.router.live[stream.request_id].instances["RLD"]
        c.run_until(lambda: len(stream.tokens) >= 5)
        keep = [s for s in c.specs if s.name != holder]
        report = c.apply_plan(keep, grace_s=0.0)  # no time to finish: moved
        assert report.evacuated == {holder: 1}
        c.run_until(lambda: stream.closed.is_set())
        evs = list(stream.events(timeout_s=1))
        assert [e.index for e in evs if e.kind == "token"] == list(range(40)) and evs[-1].kind == "end"
        assert stream.result() == reference(PROMPTS[0], 40)
        assert holder not in stream.record.extra["instances"].values() and stream.record.extra["migrations"] == 1
    finally:
        c.close()


def test_post_plan_applies_a_plan_over_http(model_config, engine_config):
    def plan(md_count: int, rld_count: int) -> Plan:
        return Plan.model_validate({"scenario": "two-dc", "pools": [
            {"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
            {"role": "RLD", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": rld_count},
            {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": md_count}]})

    c = LocalCluster(placement(plan(1, 1)), model_config, engine_config, transport="fake", threads=True)
    try:
        client = TestClient(create_app(c.router, deployment=c, token=TOKEN), headers=AUTH)
        assert client.get("/plan/status").json()["state"] == "idle"
        r = client.post("/plan", json=plan(2, 0).model_dump(mode="json"), params={"grace_s": 5})
        assert r.status_code == 202 and r.json()["state"] == "applying"
        status = _wait_applied(client)
        assert status["state"] == "succeeded" and status["strategy"] == "make-before-break"
        body = status["report"]
        assert [n.split("-")[0] for n in body["joined"]] == ["md"] and len(body["remove"]) == 1
        events = [(e["instance"].split("-")[0], e["event"]) for e in status["events"] if e["instance"]]
        assert events.index(("md", "joined")) < events.index(("rld", "draining"))  # made before it broke
        roles = sorted(i["role"] for i in client.get("/instances").json())
        assert roles == ["MD", "MD", "P"]
        out = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 3})
        assert out.status_code == 200 and len(out.json()["choices"][0]["token_ids"]) == 3
        assert client.post("/plan", json={"pools": "nope"}).status_code == 422
        assert TestClient(create_app(c.router, token=TOKEN)).post("/plan", json={}, headers=AUTH).status_code == 409
    finally:
        c.close()


def _wait_applied(client, timeout_s: float = 60.0) -> dict:
    import time

    end = time.monotonic() + timeout_s
    while (status := client.get("/plan/status").json())["state"] == "applying":
        assert time.monotonic() < end, status
        time.sleep(0.05)
    return status


def _cli():
    import typer

    from placer.cli.app import app  # the real `placer` command; deploy plugs in by entry point

    return app


def test_placer_deploy_apply_changes_a_running_deployment(model_config, engine_config, tmp_path):
    import json
    import socket
    import time

    import uvicorn
    from typer.testing import CliRunner

    cli = CliRunner(env={"PLACER_EXECUTOR_TOKEN": TOKEN})

    pools = [{"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
             {"role": "RLD", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
             {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1}]
    first = Plan.model_validate({"scenario": "two-dc", "pools": pools})
    c = LocalCluster(placement(first), model_config, engine_config, transport="fake", threads=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(c.router, deployment=c, token=TOKEN)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    try:
        end = time.monotonic() + 10
        while not server.started and time.monotonic() < end:
            time.sleep(0.02)
        new = tmp_path / "new.json"
        new.write_text(json.dumps({"scenario": "two-dc", "pools": [pools[0], {**pools[2], "count": 2}]}))
        result = cli.invoke(_cli(), ["deploy", "--apply", str(new), "--url", f"http://127.0.0.1:{port}",
                                     "--grace-s", "5"])
        assert result.exit_code == 0, result.output
        assert "make-before-break" in result.output and "joined" in result.output and "draining" in result.output
        assert "applied (make-before-break)" in result.output
        back = tmp_path / "back.json"
        back.write_text(json.dumps({"scenario": "two-dc", "pools": pools}))
        result = cli.invoke(_cli(), ["deploy", "--apply", str(back), "--url", f"http://127.0.0.1:{port}",
                                     "--grace-s", "5", "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)["report"]
        result = cli.invoke(_cli(), ["deploy", "--apply", str(new), "--url", f"http://127.0.0.1:{port}",
                                     "--grace-s", "5", "--json"])
        report = json.loads(result.stdout)["report"]
        assert len(report["joined"]) == 1 and len(report["remove"]) == 1 and report["remove"][0].startswith("rld")
        assert sorted(i.spec.role for i in c.instances.values()) == ["MD", "MD", "P"]
        bad = tmp_path / "bad.json"
        bad.write_text("{")
        assert cli.invoke(_cli(), ["deploy", "--apply", str(bad), "--url", f"http://127.0.0.1:{port}"]
                  ).exit_code == 2
        assert cli.invoke(_cli(), ["deploy"]).exit_code == 2
    finally:
        server.should_exit = True
        t.join(10)
        c.close()


def test_the_jobs_apply_hook_moves_a_running_deployment_to_the_adopted_plan(model_config, engine_config):
    from executor.apply_operation import apply_hook

    def plan(md_count: int) -> Plan:
        return Plan.model_validate({"scenario": "two-dc", "pools": [
            {"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
            {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": md_count}]})

    c = LocalCluster(placement(plan(1)), model_config, engine_config, transport="fake", threads=True)
    try:
        report = apply_hook(c, grace_s=5)(plan(3))
        assert len(report["joined"]) == 2 and report["remove"] == []
        assert sorted(c.router.instances) == sorted(s.name for s in placement(plan(3)))
        assert apply_hook(c)(plan(3))["add"] == []  # the same plan again: nothing to do
    finally:
        c.close()
