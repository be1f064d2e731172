"""A fleet plan on a real (local) Ray: each model's actors, its own router, one line actor for both.

Marked `ray`. Kept small for a 2-core machine: chat is P in dc-a + MD in dc-b (its KV crosses
the line), code one aggregated A instance in dc-a; both are tiny seeded models of different
seeds, so each model's output is checked against its own reference engine.
"""

from __future__ import annotations

import warnings

import pytest

ray = pytest.importorskip("ray")

from executor.deploy import start_local_ray
from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams
from executor.fleet import fleet_members
from executor.fleet_deploy import ModelSource, ray_fleet
from executor.placement import placement
from placer.plan import Plan

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]

FLEET = Plan.model_validate({
    "scenario": "tiny-fleet",
    "pools": [{"model": "chat", "role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
              {"model": "chat", "role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": 1},
              {"model": "code", "role": "A", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 1.0}]})
EC = EngineConfig(backend="torch", block_size=4, num_blocks=256)
SOURCES = {"chat": ModelSource(seed=0), "code": ModelSource(seed=1)}
PROMPT = [256, *b"pack my box with five dozen liquor jugs"]
N = 24


def test_a_fleet_on_ray_serves_each_model_from_its_own_actors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from executor.server import ServedModel, create_app

    sampling = SamplingParams(max_new_tokens=N, stop_at_eos=False)
    expected = {name: Engine.from_seed(ModelConfig(), EC, seed=src.seed, device="cpu").generate(PROMPT, N, sampling)
                for name, src in SOURCES.items()}
    assert expected["chat"] != expected["code"]
    start_local_ray(placement(FLEET), num_cpus=2, object_store_bytes=80 * 1024 * 1024)
    fleet = None
    try:
        fleet = ray_fleet(FLEET, fleet_members(FLEET), SOURCES, EC, start_timeout_s=90)
        assert sorted(fleet.deployments["chat"].actors) == ["chat.md-dc-b-B-tp1-0", "chat.p-dc-a-A-tp1-0"]
        assert list(fleet.deployments["code"].actors) == ["code.a-dc-a-A-tp1-0"]
        client = TestClient(create_app(models={n: ServedModel(r) for n, r in fleet.routers.items()}))
        for name in ("chat", "code"):
            r = client.post("/v1/completions", json={"model": name, "prompt": PROMPT, "max_tokens": N,
                                                     "ignore_eos": True})
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["token_ids"] == expected[name]
            assert all(i.startswith(f"{name}.") for i in r.json()["placer"]["instances"].values())
        stats = fleet.stats()
        assert stats["links"]["dc-a<->dc-b"]["dc-a->dc-b"]["bytes"] > 0  # chat's KV crossed the shared line
        assert stats["models"]["code"]["router"]["completed"] == 1
        assert stats["models"]["chat"]["instances"]["chat.md-dc-b-B-tp1-0"]["kv_received_bytes"] > 0
    finally:
        if fleet is not None:
            fleet.close()
        ray.shutdown()
