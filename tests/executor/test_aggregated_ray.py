"""An aggregated plan (two A instances, nothing else) deployed on local Ray and served over HTTP:
each A actor prefills and decodes; the completions endpoint returns the engine's greedy tokens.
Marked `ray`; kept small for a 2-core machine (tiny model, two actors)."""

from __future__ import annotations

import httpx
import pytest

ray = pytest.importorskip("ray")

from executor.config import ServingConfig
from executor.deploy import RayDeployment, start_local_ray
from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams
from executor.engine.tokenizer import ByteTokenizer
from executor.placement import placement
from executor.server import create_app
from placer.plan import Plan
from tests.support import live_server

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

PLAN = Plan.model_validate({
    "scenario": "agg-one-dc",
    "pools": [{"role": "A", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 2}],
    "routes": [{"request_class": "c", "pipeline": "A", "src": "dc-a", "dst": "dc-a", "rps": 1.0}]})
MC = ModelConfig()
EC = EngineConfig(backend="torch", block_size=4, num_blocks=256)
N = 8


def test_aggregated_plan_on_ray_serves_completions_over_http():
    prompts = ["the quick brown fox", "pack my box with five dozen liquor jugs"]
    ref = Engine.from_seed(MC, EC, seed=0, device="cpu")
    tok = ByteTokenizer()
    expected = [ref.generate(tok.encode(p), N, SamplingParams(max_new_tokens=N, stop_at_eos=False)) for p in prompts]
    start_local_ray(placement(PLAN), num_cpus=2, object_store_bytes=100 * 1024 * 1024)
    dep = None
    try:
        dep = RayDeployment(PLAN, MC, EC, ServingConfig.from_plan(PLAN), start_timeout_s=60)
        with live_server(create_app(dep.router, deployment=dep)) as url:
            for prompt, want in zip(prompts, expected, strict=True):
                r = httpx.post(f"{url}/v1/completions", json={"prompt": prompt, "max_tokens": N, "ignore_eos": True},
                               timeout=120)
                assert r.status_code == 200, r.text
                assert r.json()["choices"][0]["token_ids"] == want
        records = list(dep.router.records)
        assert [r.pipeline for r in records] == ["A", "A"] and all(r.error is None for r in records)
        assert sum(s.get("finished_here", 0) for s in dep.stats()["instances"].values()) == 2
    finally:
        if dep is not None:
            dep.close()
        ray.shutdown()
