"""Admission over HTTP: 503 with no capacity, 429 on overload (at once, not a timeout); Prometheus counters."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from executor.admission import AdmissionPolicy
from executor.cluster import LocalCluster
from executor.engine import EngineConfig
from executor.placement import InstanceSpec
from executor.server import create_app
from tests.executor.support import serving

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("rld0", "RLD", "dc-a", "A"),
         InstanceSpec("md0", "MD", "dc-b", "B")]
BODY = {"prompt": "hello there", "max_tokens": 4}


def _served(model_config, **kw):
    ec = EngineConfig(backend="torch", block_size=4, num_blocks=256)
    return LocalCluster(SPECS, model_config, ec, serving(**kw), transport="fake", threads=False)


def test_no_capacity_is_a_clean_503(model_config):
    c = _served(model_config)
    try:
        client = TestClient(create_app(c.router))
        for name in ("p0", "rld0", "md0"):
            c.kill(name, tell_router=True)
        t0 = time.monotonic()
        r = client.post("/v1/completions", json=BODY)
        assert r.status_code == 503 and "no prefill" in r.json()["detail"]
        assert time.monotonic() - t0 < 2  # refused at once
        assert c.router.stats()["rejected_no_capacity"] == 1
    finally:
        c.close()


def test_overload_is_429_with_retry_after_and_capacity_comes_back(model_config):
    c = _served(model_config, admission=AdmissionPolicy(max_per_instance=2, retry_after_s=2))
    try:
        client = TestClient(create_app(c.router))
        held = [c.router.submit([256, *b"abc"], {"max_new_tokens": 4}) for _ in range(2)]  # workers not pumped
        r = client.post("/v1/completions", json=BODY)
        assert r.status_code == 429 and r.headers["retry-after"] == "2"
        assert "limit of 2" in r.json()["detail"]
        c.run_until(lambda: all(s.closed.is_set() for s in held))
        assert all(s.error is None for s in held)
        stream = c.router.submit([256, *b"abc"], {"max_new_tokens": 4})  # room again
        c.run_until(lambda: stream.closed.is_set())
        assert stream.error is None and c.router.stats()["rejected_overloaded"] == 1
    finally:
        c.close()


def test_a_deployment_wide_limit_is_429_too(model_config):
    c = _served(model_config, admission=AdmissionPolicy(max_live=1))
    try:
        client = TestClient(create_app(c.router))
        c.router.submit([256, *b"abc"], {"max_new_tokens": 4})
        assert client.post("/v1/completions", json=BODY).status_code == 429
    finally:
        c.close()


def test_metrics_expose_migrations_fallbacks_and_failures_as_prometheus_text(model_config):
    c = _served(model_config)
    try:
        client = TestClient(create_app(c.router))
        stream = c.router.submit([256, *b"abcdefgh"], {"max_new_tokens": 8})
        c.run_until(lambda: len(stream.tokens) >= 2)
        c.kill(c.router.live[stream.request_id].instances.get("MD") or "md0", tell_router=True)
        c.run_until(lambda: stream.closed.is_set())
        r = client.get("/metrics", headers={"Accept": "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"})
        assert r.headers["content-type"].startswith("text/plain")
        lines = dict(line.rsplit(" ", 1) for line in r.text.splitlines() if not line.startswith("#"))
        assert lines["placer_migrations_total"] == "1" and lines["placer_fallbacks_total"] == "1"
        assert lines["placer_requests_completed_total"] == "1"
        assert lines["placer_requests_failed_total"] == "0" and lines["placer_peers_down_total"] == "1"
        assert lines['placer_instance_up{instance="md0"}'] == "0"
        assert client.get("/metrics?format=prometheus").text == r.text
        assert client.get("/metrics").json()["migrations"] == 1  # JSON for everyone else
    finally:
        c.close()
