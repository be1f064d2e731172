"""`POST /v1/chat/completions`: OpenAI's shapes, the chat template (the byte model's default, a checkpoint's
own), `n`, streaming chunks with `delta`, and bad messages as 422s naming the field."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest

from executor.chat import render_default
from executor.cluster import LocalCluster
from executor.engine import Engine, SamplingParams
from executor.engine.tokenizer import ByteTokenizer
from executor.placement import InstanceSpec
from executor.routing import Pipeline
from executor.server import create_app
from tests.executor.support import only, serving

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("md0", "MD", "dc-b", "B")]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]


def _client(app):
    with warnings.catch_warnings():  # starlette's note about its httpx client is not ours to fix
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    return TestClient(app)


@pytest.fixture
def served(model_config, engine_config):
    cluster = LocalCluster(SPECS, model_config, engine_config, serving(routing=only(Pipeline.P_MD)),
                           transport="fake", threads=True)
    with cluster, _client(create_app(cluster.router)) as client:
        yield cluster, client


def _greedy(model_config, engine_config, prompt: list[int], n: int) -> list[int]:
    engine = Engine.from_seed(model_config, engine_config, seed=0, device="cpu")
    return engine.generate(prompt, n, SamplingParams(max_new_tokens=n, stop_at_eos=False))


def test_chat_completion_renders_the_default_template_for_the_byte_model(served, model_config, engine_config):
    _, client = served
    r = client.post("/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 8, "ignore_eos": True})
    assert r.status_code == 200
    out = r.json()
    prompt = ByteTokenizer().encode("<|system|>\nBe brief.\n<|user|>\nName a colour.\n<|assistant|>\n")
    assert prompt == ByteTokenizer().encode(render_default(MESSAGES))
    expected = ByteTokenizer().decode(_greedy(model_config, engine_config, prompt, 8))
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    assert out["choices"][0]["message"] == {"role": "assistant", "content": expected}
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"] == {"prompt_tokens": len(prompt), "completion_tokens": 8, "total_tokens": len(prompt) + 8}
    assert out["placer"]["pipeline"] == "P-MD"


def test_streamed_chat_is_chunks_with_delta_then_usage_then_done(served):
    _, client = served
    body = {"messages": MESSAGES, "max_tokens": 6, "ignore_eos": True, "n": 2}
    whole = client.post("/v1/chat/completions", json=body).json()
    with client.stream("POST", "/v1/chat/completions",
                       json={**body, "stream": True, "stream_options": {"include_usage": True}}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(x) for x in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"] == whole["usage"]
    for i in (0, 1):
        mine = [c["choices"][0] for c in chunks[:-1] if c["choices"][0]["index"] == i]
        assert mine[0]["delta"] == {"role": "assistant", "content": ""}
        assert mine[-1]["delta"] == {} and mine[-1]["finish_reason"] == "length"
        text = "".join(c["delta"].get("content", "") for c in mine)
        assert text == whole["choices"][i]["message"]["content"]


@pytest.mark.parametrize("body, field", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "role"),
    ({"messages": [{"role": "user", "content": ["hi"]}]}, "content"),
    ({"messages": [{"role": "user", "content": 3}]}, "content"),
    ({"messages": [{"role": "user"}]}, "content"),
    ({"messages": "hi"}, "messages"),
    ({"messages": MESSAGES, "n": 9}, "n"),
    ({"messages": MESSAGES, "n": 0}, "n"),
    ({"messages": MESSAGES, "logprobs": True}, "logprobs"),
    ({"messages": MESSAGES, "top_logprobs": 2}, "top_logprobs"),
    ({"messages": MESSAGES, "max_tokens": 4, "max_completion_tokens": 5}, "max_completion_tokens"),
])
def test_bad_chat_bodies_are_422_naming_the_field(served, body, field):
    _, client = served
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 422, r.text
    assert any(field in d["loc"] or field in d["msg"] for d in r.json()["detail"])


def test_a_checkpoint_without_a_template_is_a_400_and_its_own_template_is_used(tmp_path_factory, model_config,
                                                                              engine_config):
    """The checkpoint's template renders the prompt (ids equal transformers' apply_chat_template, reply
    equal its greedy generate); without one, a 400 that says so rather than a guessed format."""
    from executor.engine.hf import load_checkpoint
    from tests.executor.engine.hf_support import hf_greedy, tiny_checkpoints

    transformers = pytest.importorskip("transformers")
    model_dir = tiny_checkpoints(tmp_path_factory)["qwen2"]
    ckpt = load_checkpoint(model_dir)
    ids = transformers.AutoTokenizer.from_pretrained(model_dir).apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # a BatchEncoding in newer transformers
    expected = ckpt.tokenizer.decode(hf_greedy(model_dir, ids, 8, stop_at_eos=False))
    cluster = LocalCluster(SPECS, ckpt, engine_config, serving(routing=only(Pipeline.P_MD)), transport="fake",
                           threads=True)
    with cluster, _client(create_app(cluster.router, model_name="qwen2", tokenizer=ckpt.tokenizer)) as client:
        r = client.post("/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 8, "ignore_eos": True})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == len(ids)
        assert r.json()["choices"][0]["message"]["content"] == expected
    bare = dataclasses.replace(ckpt.tokenizer, chat_template=None)
    with _client(create_app(cluster.router, model_name="bare", tokenizer=bare)) as client:
        r = client.post("/v1/chat/completions", json={"messages": MESSAGES})
        assert r.status_code == 400 and "no chat template" in r.text and "bare" in r.text


def test_chat_is_protected_with_the_completions(served):
    """`protect_completions` covers chat too: an inference route, never an open side door."""
    cluster, _ = served
    token = "control-token-for-tests"
    with _client(create_app(cluster.router, token=token, protect_completions=True)) as closed:
        body = {"messages": MESSAGES, "max_tokens": 2}
        assert closed.post("/v1/chat/completions", json=body).status_code == 401
        ok = closed.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
