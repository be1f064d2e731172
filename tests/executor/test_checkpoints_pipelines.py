"""Real checkpoints through every PDD pipeline: token-identical to transformers' greedy `generate`.

Tiny random Llama-3, Qwen2 and Qwen3 checkpoints (built locally, `engine/hf_support.py`)
served by a `LocalCluster` — P and RLD in dc-a, MD in dc-b behind a shaped WAN line slow
enough that RLD streams eager tokens before MD holds the KV, so the handoff (one-shot or
catch-up) really happens — and each request's output compared with transformers' greedy
output for the same prompt ids (float32, CPU, no EOS stop so every request runs its budget).
"""

from __future__ import annotations

import pytest

from executor.cluster import LocalCluster
from executor.engine import EngineConfig, SamplingParams
from executor.engine.hf import load_checkpoint
from executor.handoff import HandoffPolicy
from executor.placement import InstanceSpec
from executor.routing import Pipeline
from executor.transport.shaping import LinkShape
from tests.executor.engine.hf_support import CORPUS, FAMILIES, hf_greedy, tiny_checkpoints
from placer.pdd import CatchUpRule
from tests.executor.support import only, serving

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("rld0", "RLD", "dc-a", "A"),
         InstanceSpec("md0", "MD", "dc-b", "B")]
LINE = {frozenset(("dc-a", "dc-b")): LinkShape(gbit_per_s=0.01, rtt_ms=4, jitter_ms=0.4)}  # 1.25 MB/s
# (a short RTT: catch-up takes up to max_rounds round trips, and at 40 ms a quiet machine's RLD
# decoded all MAX_NEW tokens of the tiny model before the handoff ended — no handoff left to check)
ENGINE = EngineConfig(backend="torch", block_size=4, num_blocks=512)
MAX_NEW = 128  # long enough that RLD is still decoding when MD holds the KV
CASES = [(Pipeline.P_MD, "adaptive"), (Pipeline.P_RLD, "adaptive"), (Pipeline.P_RLD_MD, "one-shot"),
         (Pipeline.P_RLD_MD, "catch-up")]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return {f: load_checkpoint(d) for f, d in tiny_checkpoints(tmp_path_factory).items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, checkpoints):
    """{family: [(prompt ids, transformers' greedy output)]}."""
    dirs = tiny_checkpoints(tmp_path_factory)
    out = {}
    for family, ckpt in checkpoints.items():
        prompts = [ckpt.tokenizer.encode(" ".join(CORPUS[:2])), ckpt.tokenizer.encode(CORPUS[2])]
        out[family] = [(p, hf_greedy(dirs[family], p, MAX_NEW, stop_at_eos=False)) for p in prompts]
    return out


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("pipeline", "mode"), CASES, ids=[f"{p.value}-{m}" for p, m in CASES])
def test_every_pipeline_serves_transformers_greedy_output(checkpoints, reference, family, pipeline, mode):
    config = serving(routing=only(pipeline), links=LINE, request_timeout_s=60,
                     handoff=HandoffPolicy(mode=mode, catch_up_threshold_tokens=4, catch_up=CatchUpRule(2)))
    with LocalCluster(SPECS, checkpoints[family], ENGINE, config, transport="tcp") as c:
        streams = [c.router.submit(p, SamplingParams(max_new_tokens=MAX_NEW, stop_at_eos=False))
                   for p, _ in reference[family]]
        assert [s.result(timeout_s=90) for s in streams] == [ref for _, ref in reference[family]]
        for s in streams:
            assert s.pipeline is pipeline
            assert s.record.extra["duplicates"] == 0 and s.record.extra["conflicts"] == 0
        if pipeline is Pipeline.P_RLD_MD:  # MD took over by a handoff in the chosen mode (on a very busy
            # machine RLD may finish a request before MD holds its KV; not both of them)
            modes = [s.record.extra.get("handoff_mode") for s in streams if s.record.extra["relay_tokens"] < MAX_NEW]
            assert modes and set(modes) == {mode}


def test_the_http_endpoint_speaks_the_checkpoints_text(tmp_path_factory, checkpoints):
    """`placer deploy --model-dir`: a text prompt is encoded with the checkpoint's tokenizer, the reply
    decoded with it (streamed text pieces add up to the whole), and ids outside its vocabulary are a 422."""
    import json
    import warnings

    from executor.server import create_app

    family = "qwen2"
    ckpt, model_dir = checkpoints[family], tiny_checkpoints(tmp_path_factory)[family]
    prompt = CORPUS[3]
    expected = ckpt.tokenizer.decode(hf_greedy(model_dir, ckpt.tokenizer.encode(prompt), 16, stop_at_eos=False))
    config = serving(routing=only(Pipeline.P_MD), links=LINE, request_timeout_s=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    with LocalCluster(SPECS, ckpt, ENGINE, config, transport="tcp") as c, \
            TestClient(create_app(c.router, model_name=family, tokenizer=ckpt.tokenizer)) as client:
        body = {"prompt": prompt, "max_tokens": 16, "ignore_eos": True}
        whole = client.post("/v1/completions", json=body)
        assert whole.status_code == 200 and whole.json()["choices"][0]["text"] == expected
        with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
            pieces = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
        assert "".join(p["choices"][0]["text"] for p in pieces) == expected
        vocab = ckpt.tokenizer.vocab_size
        bad = client.post("/v1/completions", json={"prompt": [1, vocab], "max_tokens": 4})
        assert bad.status_code == 422 and str(vocab) in bad.text
