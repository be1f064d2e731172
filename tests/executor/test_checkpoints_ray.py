"""A real checkpoint deployed on local Ray (`--model-dir`): the actors load it and serve transformers' output.

Marked `ray` (`pytest -m ray`). One local Ray emulating two datacenters, three actors that
each load the tiny Qwen2 checkpoint from its directory (biases, tied head, its own
tokenizer), P→RLD→MD with catch-up handoff, then P→MD, compared token for token with
transformers' greedy `generate`.
"""

from __future__ import annotations

import dataclasses

import pytest

ray = pytest.importorskip("ray")

from executor.config import ServingConfig
from executor.deploy import RayDeployment, start_local_ray
from executor.devices import Runtime
from executor.engine import EngineConfig, ModelConfig, SamplingParams
from executor.handoff import HandoffPolicy
from executor.placement import placement
from executor.routing import Pipeline
from tests.executor.engine.hf_support import CORPUS, hf_greedy, tiny_checkpoints
from tests.executor.support import only
from tests.executor.test_ray_deploy import LINE, PLAN  # P and RLD in dc-a, MD in dc-b; the shaped line

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

N = 96


def test_actors_load_the_checkpoint_directory_and_serve_transformers_greedy_output(tmp_path_factory):
    model_dir = tiny_checkpoints(tmp_path_factory)["qwen2"]
    from executor.engine.hf_tokenizer import HFTokenizer

    tok = HFTokenizer.from_dir(model_dir)
    prompts = [tok.encode(" ".join(CORPUS[:2])), tok.encode(CORPUS[3])]
    expected = [hf_greedy(model_dir, p, N, stop_at_eos=False) for p in prompts]
    start_local_ray(placement(PLAN), num_cpus=2, object_store_bytes=100 * 1024 * 1024)
    dep = None
    try:
        config = ServingConfig.from_plan(PLAN, links=LINE, routing=only(Pipeline.P_RLD_MD),
                                         handoff=HandoffPolicy(mode="catch-up", catch_up_threshold_tokens=4))
        dep = RayDeployment(PLAN, ModelConfig(), EngineConfig(backend="torch", block_size=4, num_blocks=256), config,
                            model_dir=str(model_dir), runtime=Runtime())
        for pipeline in (Pipeline.P_RLD_MD, Pipeline.P_MD):
            dep.router.config = dataclasses.replace(dep.router.config, routing=only(pipeline))
            streams = [dep.router.submit(p, SamplingParams(max_new_tokens=N, stop_at_eos=False)) for p in prompts]
            assert [s.result(120) for s in streams] == expected, pipeline
        assert all(s.device == "cpu" and s.num_gpus == 0 for s in dep.specs)
    finally:
        if dep is not None:
            dep.close()
        ray.shutdown()
