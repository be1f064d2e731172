"""`GET /metrics`: the vLLM-named latency histograms and per-role prefix-cache counters, through a real app,
read back with prometheus_client's own parser."""

from __future__ import annotations

import warnings

import pytest
from prometheus_client.parser import text_string_to_metric_families

from executor.cluster import LocalCluster
from executor.latency_metrics import TTFT_BUCKETS, prefix_hits, queue_times
from executor.placement import InstanceSpec
from executor.request_log import RequestRecord
from executor.routing import Pipeline
from executor.server import create_app
from tests.executor.support import only, serving

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("md0", "MD", "dc-b", "B")]
MODEL = "placer-tiny"


def _samples(client) -> dict[str, list]:
    r = client.get("/metrics", headers={"Accept": "text/plain"})
    assert r.status_code == 200
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _value(samples, name: str, **labels: str) -> float:
    found = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


@pytest.fixture
def client(model_config, engine_config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    cluster = LocalCluster(SPECS, model_config, engine_config, serving(routing=only(Pipeline.P_MD)),
                           transport="fake", threads=True)
    with cluster, TestClient(create_app(cluster.router, model_name=MODEL)) as c:
        yield c


def test_ttft_lands_in_its_bucket_and_counts_follow_the_requests(client):
    body = {"prompt": "the same prefix, asked three times", "max_tokens": 5, "ignore_eos": True}
    first = client.post("/v1/completions", json=body).json()
    ttft = first["placer"]["ttft_s"]
    m = _samples(client)
    buckets = {s.labels["le"]: s.value for s in m["placer:time_to_first_token_seconds_bucket"]
               if s.labels["model_name"] == MODEL}
    for le in TTFT_BUCKETS:  # cumulative: 0 below the observation, 1 from its bucket up
        assert buckets[str(le)] == (1.0 if ttft <= le else 0.0), (le, ttft)
    assert buckets["+Inf"] == 1.0
    assert _value(m, "placer:time_to_first_token_seconds_sum", model_name=MODEL) == pytest.approx(ttft)

    for _ in range(2):
        client.post("/v1/completions", json=body)
    m = _samples(client)
    prompt_tokens = first["usage"]["prompt_tokens"]
    assert _value(m, "placer:time_to_first_token_seconds_count", model_name=MODEL) == 3
    assert _value(m, "placer:e2e_request_latency_seconds_count", model_name=MODEL) == 3
    assert _value(m, "placer:request_time_per_output_token_seconds_count", model_name=MODEL) == 3
    assert _value(m, "placer:inter_token_latency_seconds_count", model_name=MODEL) == 3 * 4  # gaps of 5 tokens
    assert _value(m, "placer:request_queue_time_seconds_count", model_name=MODEL, role="P") == 3
    assert _value(m, "placer:request_queue_time_seconds_count", model_name=MODEL, role="MD") == 3
    assert _value(m, "placer:prefix_cache_queries_total", model_name=MODEL, role="P") == 3 * prompt_tokens
    hits = _value(m, "placer:prefix_cache_hits_total", model_name=MODEL, role="P")
    assert 0 < hits < 3 * prompt_tokens  # the second and third prompts hit the first one's blocks
    e2e = _value(m, "placer:e2e_request_latency_seconds_sum", model_name=MODEL)
    assert e2e >= _value(m, "placer:time_to_first_token_seconds_sum", model_name=MODEL)
    assert _value(m, "placer_requests_completed_total") == 3  # the counters are still there


def test_chat_and_n_choices_are_each_observed(client):
    client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                                              "n": 2})
    m = _samples(client)
    assert _value(m, "placer:e2e_request_latency_seconds_count", model_name=MODEL) == 2


def test_an_aggregated_instance_reports_as_role_a(model_config, engine_config):
    """On pipeline A the queue and the prefix hit are A's (not a P's zero), through a real app."""
    from fastapi.testclient import TestClient

    from executor.config import ServingConfig
    from executor.placement import placement
    from placer.plan import Plan

    plan = Plan.model_validate({"scenario": "agg", "pools": [
        {"role": "A", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 1}], "routes": [
        {"request_class": "c", "pipeline": "A", "src": "dc-a", "dst": "dc-a", "rps": 1.0}]})
    cluster = LocalCluster(placement(plan), model_config, engine_config,
                           ServingConfig.from_plan(plan, heartbeat_s=None), transport="fake", threads=True)
    with cluster, TestClient(create_app(cluster.router, model_name=MODEL)) as client:
        for _ in range(2):
            assert client.post("/v1/completions", json={"prompt": "aggregated prompt here", "max_tokens": 3}
                               ).status_code == 200
        m = _samples(client)
    assert _value(m, "placer:request_queue_time_seconds_count", model_name=MODEL, role="A") == 2
    assert _value(m, "placer:prefix_cache_hits_total", model_name=MODEL, role="A") > 0  # the second hit the first
    assert not [s for s in m["placer:request_queue_time_seconds_count"] if s.labels["role"] == "P"]


def _record(pipeline: str, **extra) -> RequestRecord:
    return RequestRecord("r", 0.0, 100, 10, 40, pipeline, 0.5, 0.02, "length", None, extra)


def test_queue_time_and_prefix_hits_by_role():
    agg = _record("A", orders_sent_after_s=0.01, prefill_done_after_s=0.5, prefill_s=0.3, p_queue_s=0.0)
    assert queue_times(agg) == {"A": pytest.approx(0.19)} and prefix_hits(agg) == {"A": 40}
    relay = _record("P-RLD-MD", p_queue_s=0.2, prefill_s=0.1, rld_kv_inbox_s=0.01, md_kv_inbox_s=0.03,
                    md_cached_tokens=64)
    assert queue_times(relay) == {"P": 0.2, "RLD": 0.01, "MD": 0.03}
    assert prefix_hits(relay) == {"P": 40, "MD": 64}
    pd = _record("P-D", p_queue_s=0.2, prefill_s=0.1, md_kv_inbox_s=0.03, md_cached_tokens=0)
    assert queue_times(pd) == {"P": 0.2, "D": 0.03} and prefix_hits(pd) == {"P": 40, "D": 0}
    assert queue_times(_record("P-MD")) == {} and prefix_hits(_record("P-MD")) == {}
