"""The OpenAI-style completions endpoint: SSE streaming, text or token ids, errors as the client sees them."""

from __future__ import annotations

import json
import warnings

import pytest

from executor.cluster import LocalCluster
from executor.engine import Engine, SamplingParams
from executor.engine.tokenizer import ByteTokenizer
from executor.placement import InstanceSpec
from executor.routing import Pipeline, RoutingPolicy
from executor.server import create_app
from placer.pdd import FilterRule
from tests.executor.support import only, serving

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("rld0", "RLD", "dc-a", "A"),
         InstanceSpec("md0", "MD", "dc-b", "B")]
TOKEN = "control-token-for-tests"




@pytest.fixture
def served(model_config, engine_config):
    policy = RoutingPolicy(direct_min_hit_rate=0.5, filter_rule=FilterRule(min_input_tokens=10**6))
    cluster = LocalCluster(SPECS, model_config, engine_config, serving(routing=policy), transport="fake", threads=True)
    with warnings.catch_warnings():  # starlette's note about its httpx client is not ours to fix
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    with TestClient(create_app(cluster.router, token=TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield cluster, client
    cluster.close()


@pytest.fixture
def reference(model_config, engine_config):
    engine = Engine.from_seed(model_config, engine_config, seed=0, device="cpu")
    return lambda prompt, n, eos=True: engine.generate(prompt, n, SamplingParams(max_new_tokens=n, stop_at_eos=eos))


def sse_events(response) -> list:
    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_streamed_completion_is_one_event_per_token_then_done(served, reference):
    _, client = served
    body = {"prompt": "the quick brown fox", "max_tokens": 12, "stream": True, "ignore_eos": True}
    with client.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    tokens = [e["choices"][0]["token_ids"][0] for e in events[:-2]]
    assert tokens == reference(ByteTokenizer().encode("the quick brown fox"), 12, eos=False)
    last = events[-2]
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["usage"] == {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32}
    assert last["placer"]["pipeline"] in ("P-MD", "P-RLD-MD") and last["placer"]["ttft_s"] > 0
    text = "".join(e["choices"][0]["text"] for e in events[:-1])
    assert text == ByteTokenizer().decode(tokens)


def test_token_id_prompt_without_streaming(served, reference):
    _, client = served
    prompt = [256, *b"jumps over the lazy dog"]
    r = client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 8})
    assert r.status_code == 200
    choice = r.json()["choices"][0]
    assert choice["token_ids"] == reference(prompt, 8)
    assert choice["finish_reason"] in ("length", "stop")


@pytest.mark.parametrize("body, field", [
    ({"prompt": [1, 999], "max_tokens": 4}, "outside the vocabulary"),
    ({"prompt": [], "max_tokens": 4}, "must not be empty"),
    ({"prompt": "hi", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "hi", "temperature": -1}, "temperature"),
    ('{"prompt": "hi", "temperature": NaN}', "temperature"),
    ('{"prompt": "hi", "temperature": Infinity}', "temperature"),
    ('{"prompt": "hi", "temperature": 1e400}', "temperature"),
    ({"prompt": "hi", "seed": 2**64}, "seed"),
    ({"prompt": "hi", "seed": -1}, "seed"),
])
def test_bad_bodies_are_422_naming_the_field(served, body, field):
    _, client = served
    if isinstance(body, str):  # JSON that json.dumps would not write (NaN, Infinity)
        r = client.post("/v1/completions", content=body, headers={"content-type": "application/json"})
    else:
        r = client.post("/v1/completions", json=body)
    assert r.status_code == 422 and field in r.text


def test_no_instances_is_503_and_instances_register_over_http(served):
    _, client = served
    names = [i["name"] for i in client.get("/instances").json()]
    assert sorted(names) == ["md0", "p0", "rld0"]
    assert client.delete("/instances/p0").status_code == 204
    r = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
    assert r.status_code == 503 and "no prefill" in r.text
    assert client.get("/health").json()["status"] == "degraded"
    back = {"name": "p0", "role": "P", "datacenter": "dc-a"}
    assert client.post("/instances", json=back).status_code == 201
    assert client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2}).status_code == 200
    assert client.post("/instances", json={**back, "role": "X"}).status_code == 422
    assert client.delete("/instances/nope").status_code == 404


def test_models_and_metrics(served):
    _, client = served
    model = client.get("/v1/models").json()["data"][0]
    assert model["id"] == "placer-tiny" and model["object"] == "model" and model["created"] > 0
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/completions", "/v1/chat/completions", "/v1/models", "/metrics"} <= set(paths)
    chat = paths["/v1/chat/completions"]["post"]
    assert {"400", "422", "429", "503"} <= set(chat["responses"])
    client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
    assert client.get("/metrics").json()["completed"] == 1


def test_n_choices_are_separate_requests_seeded_seed_plus_i(model_config, engine_config):
    """`n` is honoured (it was silently ignored: one choice came back): choice i is the request with
    seed + i, the usage counts the prompt once and every choice's tokens. (One pipeline, P-MD: a sampled
    request's tokens depend on where it is decoded, the relay's RLD or MD.)"""
    from fastapi.testclient import TestClient

    cluster = LocalCluster(SPECS, model_config, engine_config, serving(routing=only(Pipeline.P_MD)),
                           transport="fake", threads=True)
    body = {"prompt": "sampled text", "max_tokens": 6, "temperature": 1.5, "seed": 7, "ignore_eos": True}
    with cluster, TestClient(create_app(cluster.router)) as client:
        r = client.post("/v1/completions", json={**body, "n": 3})
        alone = [client.post("/v1/completions", json={**body, "seed": 7 + i}).json()["choices"][0]["token_ids"]
                 for i in range(3)]
        completed = cluster.router.counters["completed"]
    assert r.status_code == 200
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    assert [c["token_ids"] for c in choices] == alone and len({tuple(a) for a in alone}) > 1
    assert r.json()["usage"] == {"prompt_tokens": 13, "completion_tokens": 18, "total_tokens": 31}
    assert completed == 6


def test_n_choices_stream_interleaved_each_with_its_index(served):
    _, client = served
    body = {"prompt": "two at once", "max_tokens": 5, "ignore_eos": True, "n": 2}
    whole = client.post("/v1/completions", json=body).json()
    with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    by_choice = {0: [], 1: []}
    for e in events[:-1]:
        by_choice[e["choices"][0]["index"]] += e["choices"][0]["token_ids"]
    assert [by_choice[0], by_choice[1]] == [c["token_ids"] for c in whole["choices"]]
    ends = [e for e in events[:-1] if e["choices"][0]["finish_reason"]]
    assert sorted(e["choices"][0]["index"] for e in ends) == [0, 1]
    assert ends[-1]["usage"]["completion_tokens"] == 10 and "usage" not in ends[0]


def test_n_is_bounded_and_logprobs_refused_not_ignored(served):
    _, client = served
    r = client.post("/v1/completions", json={"prompt": "hi", "n": 9})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "n"
    r = client.post("/v1/completions", json={"prompt": "hi", "logprobs": 1})
    assert r.status_code == 422 and "log-probabilities" in r.text and r.json()["detail"][0]["loc"][-1] == "logprobs"


def test_a_refused_choice_cancels_the_ones_already_routed(model_config, engine_config):
    """All or none: with room for two requests, n = 3 is a 429 and nothing stays in flight."""
    from executor.admission import AdmissionPolicy
    from fastapi.testclient import TestClient

    cluster = LocalCluster(SPECS, model_config, engine_config, serving(admission=AdmissionPolicy(max_live=2)),
                           transport="fake", threads=True)
    try:
        with TestClient(create_app(cluster.router)) as client:
            r = client.post("/v1/completions", json={"prompt": "three please", "max_tokens": 64, "n": 3})
            assert r.status_code == 429 and "Retry-After" in r.headers
            assert cluster.router.live == {} and cluster.router.counters["cancelled"] == 2
    finally:
        cluster.close()
