"""The executor's attack surface (issue 18, items 8 and 9): who may change the deployment, what a
request may ask for, and what happens when a client walks away.

In-process deployments (`LocalCluster` over the fake transport) behind the real app; the
disconnect test goes over real HTTP (uvicorn + httpx) because only a real socket closes.
"""

from __future__ import annotations

import json
import time
import warnings

import httpx
import pytest

from executor.admission import AdmissionPolicy
from executor.cluster import LocalCluster
from executor.engine import EngineConfig
from executor.placement import InstanceSpec, placement
from executor.server import create_app
from placer.plan import Plan
from tests.executor.support import serving
from tests.support import live_server as serve

with warnings.catch_warnings():  # starlette's note about its httpx client is not ours to fix
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "executor-control-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("md0", "MD", "dc-b", "B")]
PLAN = Plan.model_validate({"scenario": "two-dc", "pools": [
    {"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
    {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1}]})
CONTROL = [("get", "/instances", None), ("post", "/instances", {"name": "x", "role": "P", "datacenter": "dc-a"}),
           ("delete", "/instances/p0", None), ("post", "/plan", {"pools": []}), ("get", "/plan/status", None)]


@pytest.fixture
def cluster(model_config, engine_config):
    c = LocalCluster(SPECS, model_config, engine_config, serving(), transport="fake", threads=True)
    yield c
    c.close()


def _call(client, method: str, path: str, body, headers=None):
    return client.request(method.upper(), path, json=body, headers=headers or {})


@pytest.mark.parametrize("method, path, body", CONTROL)
def test_control_plane_needs_the_token(cluster, method, path, body):
    client = TestClient(create_app(cluster.router, deployment=cluster, token=TOKEN))
    assert _call(client, method, path, body).status_code == 401
    assert _call(client, method, path, body, {"Authorization": "Bearer wrong-token-123"}).status_code == 403
    assert _call(client, method, path, body, {"Authorization": TOKEN}).status_code == 401  # no scheme
    assert sorted(cluster.router.instances) == ["md0", "p0"]  # nothing changed
    locked = TestClient(create_app(cluster.router, deployment=cluster))  # started without a token
    r = _call(locked, method, path, body, AUTH)
    assert r.status_code == 403 and "locked" in r.json()["detail"]


def test_completions_stay_open_unless_protected(cluster):
    body = {"prompt": "hi", "max_tokens": 2}
    open_app = TestClient(create_app(cluster.router, token=TOKEN))
    assert open_app.post("/v1/completions", json=body).status_code == 200
    assert open_app.get("/health").status_code == 200
    closed = TestClient(create_app(cluster.router, token=TOKEN, protect_completions=True))
    assert closed.post("/v1/completions", json=body).status_code == 401
    assert closed.get("/v1/models").status_code == 401
    assert closed.post("/v1/completions", json=body, headers=AUTH).status_code == 200
    assert closed.get("/health").status_code == 200  # probes stay open
    with pytest.raises(ValueError, match="token"):
        create_app(cluster.router, protect_completions=True)
    with pytest.raises(ValueError, match="token"):
        create_app(cluster.router, token="short")


def _apply(client, plan: Plan) -> dict:
    """POST /plan (202), then follow /plan/status to the end; the change's report."""
    assert client.post("/plan", json=plan.model_dump(mode="json"), params={"grace_s": 1}).status_code == 202
    end = time.monotonic() + 30
    while (status := client.get("/plan/status").json())["state"] == "applying" and time.monotonic() < end:
        time.sleep(0.02)
    assert status["state"] == "succeeded", status
    return status["report"]


def test_reposting_the_plan_restores_deleted_instances(model_config, engine_config):
    c = LocalCluster(placement(PLAN), model_config, engine_config, serving(), transport="fake", threads=True)
    try:
        client = TestClient(create_app(c.router, deployment=c, token=TOKEN), headers=AUTH)
        p_name = next(i["name"] for i in client.get("/instances").json() if i["role"] == "P")
        assert client.delete(f"/instances/{p_name}").status_code == 204
        assert client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2}).status_code == 503
        assert _apply(client, PLAN)["joined"] == [p_name]
        out = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
        assert out.status_code == 200 and len(out.json()["choices"][0]["token_ids"]) == 2
        assert _apply(client, PLAN)["add"] == []  # now in step
    finally:
        c.close()


def test_the_extreme_valid_seed_and_temperature_are_served(cluster):
    client = TestClient(create_app(cluster.router))
    r = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 3, "temperature": 1e300, "seed": 2**64 - 1})
    assert r.status_code == 200 and len(r.json()["choices"][0]["token_ids"]) == 3


def test_a_prompt_beyond_an_instances_kv_is_413_before_any_work(cluster, engine_config):
    client = TestClient(create_app(cluster.router))
    capacity = engine_config.num_blocks * engine_config.block_size
    t0 = time.monotonic()
    r = client.post("/v1/completions", json={"prompt": [65] * capacity, "max_tokens": 1})
    assert r.status_code == 413 and "KV blocks" in r.json()["detail"] and time.monotonic() - t0 < 2
    stats = cluster.router.stats()
    assert stats["live"] == 0 and not any(k.startswith("pipeline_") for k in stats)  # no order went out
    fits = client.post("/v1/completions", json={"prompt": [65] * (capacity - 8), "max_tokens": 4})
    assert fits.status_code == 200


def test_a_prompt_beyond_the_context_is_422_naming_it(model_config, engine_config):
    c = LocalCluster(SPECS, model_config, engine_config, serving(admission=AdmissionPolicy(max_context_tokens=64)),
                     transport="fake", threads=True)
    try:
        client = TestClient(create_app(c.router))
        r = client.post("/v1/completions", json={"prompt": "x" * 60, "max_tokens": 16})
        assert r.status_code == 422 and "context of 64 tokens" in r.json()["detail"]
        assert client.post("/v1/completions", json={"prompt": "x" * 40, "max_tokens": 16}).status_code == 200
    finally:
        c.close()


def test_a_body_over_the_limit_is_413_and_not_parsed(cluster):
    client = TestClient(create_app(cluster.router, max_body_bytes=4096))
    r = client.post("/v1/completions", content=json.dumps({"prompt": "x" * 10_000}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert cluster.router.stats()["live"] == 0


def test_placer_deploy_apply_sends_the_token_and_never_prints_it(model_config, engine_config, tmp_path):
    from typer.testing import CliRunner

    from placer.cli.app import app as placer_app

    c = LocalCluster(placement(PLAN), model_config, engine_config, serving(), transport="fake", threads=True)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(PLAN.model_dump_json())
    try:
        with serve(create_app(c.router, deployment=c, token=TOKEN)) as url:
            def apply(*extra, env=None):
                return CliRunner().invoke(placer_app, ["deploy", "--apply", str(plan_file), "--url", url,
                                                       "--grace-s", "1", *extra], env=env or {})
            wrong = apply("--token", "not-the-token-1")
            assert wrong.exit_code == 1 and "403" in wrong.output and "not-the-token-1" not in wrong.output
            assert apply().exit_code == 1  # no token anywhere: refused (401)
            short = apply("--token", "abc")
            assert short.exit_code == 2 and "executor_token: String should have at least 8" in short.output
            assert "abc" not in short.output
            right = apply("--json", env={"PLACER_EXECUTOR_TOKEN": TOKEN})
            assert right.exit_code == 0, right.output
            assert json.loads(right.stdout)["report"]["add"] == [] and TOKEN not in right.output
    finally:
        c.close()


@pytest.fixture
def live_server(model_config):
    """A deployment with room for long outputs, served by uvicorn on a free port."""
    ec = EngineConfig(backend="torch", block_size=4, num_blocks=2048)
    c = LocalCluster(SPECS, model_config, ec, serving(), transport="fake", threads=True)
    try:
        with serve(create_app(c.router)) as url:
            yield c, url
    finally:
        c.close()


def _all_blocks_free(c: LocalCluster) -> bool:
    return all(i.worker.engine.blocks.num_available == c.engine_config.num_blocks for i in c.instances.values())


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_disconnects_cancels_its_request(live_server, stream):
    c, url = live_server
    body = {"prompt": "a long story", "max_tokens": 4096, "ignore_eos": True, "stream": stream}
    if stream:
        with httpx.Client(timeout=10) as http, http.stream("POST", f"{url}/v1/completions", json=body) as r:
            lines = r.iter_lines()
            assert sum(1 for line, _ in zip(lines, range(6)) if line.startswith("data: ")) >= 3
    else:  # the client gives up waiting for the whole completion
        with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=0.5) as http:
            http.post(f"{url}/v1/completions", json=body)
    gone = time.monotonic()
    while (c.router.stats()["live"] or not _all_blocks_free(c)) and time.monotonic() - gone < 2.0:
        time.sleep(0.02)
    assert c.router.stats()["live"] == 0 and c.router.stats()["cancelled"] == 1
    assert _all_blocks_free(c), {n: i.worker.engine.blocks.num_available for n, i in c.instances.items()}
    assert c.router.records[-1].error == "client disconnected"


# ---- issue 43, part 5: the executor's edges -------------------------------------------------


@pytest.mark.parametrize("body, field", [
    ({"prompt": "\ud800 lone", "max_tokens": 2}, "prompt"),  # a lone surrogate: once a 500 (UnicodeEncodeError)
    ({"prompt": "hi", "model": "m\udfff", "max_tokens": 2}, "model"),
    ({"prompt": "hi", "max_tokens": True}, "max_tokens"),  # once taken as 1
    ({"prompt": "hi", "seed": False}, "seed"),
    ({"prompt": "hi", "stream": "yes"}, "stream"),
    ({"prompt": [True, 65]}, "prompt"),
])
def test_unencodable_text_and_booleans_for_integers_are_422_naming_the_field(cluster, body, field):
    client = TestClient(create_app(cluster.router), raise_server_exceptions=False)
    r = client.post("/v1/completions", content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert field in {e["loc"][1] for e in r.json()["detail"]}
    assert cluster.router.stats()["live"] == 0


@pytest.mark.parametrize("temperature", [1e-45, 5e-324, 1e-6])
def test_a_temperature_below_the_greedy_cut_is_served_greedily(cluster, temperature):
    # 1e-45 once answered 502 "probability tensor contains inf/nan"; the limit t → 0 is argmax
    client = TestClient(create_app(cluster.router))
    body = {"prompt": "hello", "max_tokens": 6, "seed": 7, "ignore_eos": True}
    greedy = client.post("/v1/completions", json=body).json()["choices"][0]["token_ids"]
    r = client.post("/v1/completions", json={**body, "temperature": temperature})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["token_ids"] == greedy


def test_an_integer_temperature_is_still_a_float(cluster):
    r = TestClient(create_app(cluster.router)).post("/v1/completions", json={"prompt": "hi", "max_tokens": 2,
                                                                               "temperature": 1})
    assert r.status_code == 200


@pytest.mark.parametrize("path", ["/openapi.json", "/docs"])
def test_the_api_description_needs_the_token(cluster, path):
    client = TestClient(create_app(cluster.router, token=TOKEN))
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"Authorization": "Bearer wrong-token-123"}).status_code == 403
    assert client.get(path, headers=AUTH).status_code == 200
    assert TestClient(create_app(cluster.router)).get(path, headers=AUTH).status_code == 403  # locked
    assert client.get("/redoc").status_code == 404


@pytest.mark.parametrize("change, field", [
    ({"address": "not an address"}, "address"),
    ({"address": "host:99999"}, "address"),
    ({"address": "[zz::1]:80"}, "address"),
    ({"tp": 10**30}, "tp"),
    ({"tp": True}, "tp"),
    ({"tp": 0}, "tp"),
    ({"datacenter": "dc-nowhere"}, "datacenter"),
    ({"name": "n" * 100_000}, "name"),
    ({"name": "../etc"}, "name"),
    ({"name": "a\ud800"}, "name"),
    ({"chip": ""}, "chip"),
    ({"extra": 1}, "extra"),
])
def test_the_control_plane_validates_what_it_registers(cluster, change, field):
    client = TestClient(create_app(cluster.router, deployment=cluster, token=TOKEN), headers=AUTH,
                        raise_server_exceptions=False)
    body = {"name": "p9", "role": "P", "datacenter": "dc-a", "address": "10.0.0.7:7001", **change}
    r = client.post("/instances", content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 422 and field in r.text[:2000], r.text[:300]
    assert len(r.content) < 4096  # the 100 kB name is not echoed
    assert "p9" not in cluster.router.instances
    ok = client.post("/instances", json={"name": "p9", "role": "P", "datacenter": "dc-b", "tp": 8,
                                         "address": "[::1]:7001"})
    assert ok.status_code == 201, ok.text


def test_a_slow_headers_client_does_not_starve_the_executors_health(cluster):
    # placer deploy serves the executor with placer.service.http.serve: the same header deadline and caps
    import socket
    import threading

    from placer.service.http import BoundedServer, HttpLimits, bounded_config
    from tests.placer.service.api.slow_clients import Slowloris, health_latencies

    limits = HttpLimits(header_timeout_s=1.0, max_connections=24, max_per_client=6)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = BoundedServer(bounded_config(create_app(cluster.router), limits, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        with Slowloris(sock.getsockname()[1], addresses=10, per_address=10) as attack:
            time.sleep(0.5)
            latencies = health_latencies(f"http://127.0.0.1:{sock.getsockname()[1]}", 3.0, 2.0)
        assert attack.opened > 100 and max(latencies) <= 2.0, latencies  # evicted and reopened, health answered
    finally:
        server.should_exit = True
        thread.join(20)
