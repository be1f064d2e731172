"""Request latency histograms and per-role prefix-cache counters, named as vLLM names them (`placer:` prefix).

In: each request as it ends — its client `RequestStream` (the router's `on_end` hook): the
`RequestRecord` (TTFT, TPOT, the prefix hit, `extra` with each role's queue figures), the token
arrival times and the request's start and end. Out: Prometheus series in a registry of its own
(`RequestMetrics.text()`, appended by `executor.prometheus` to `GET /metrics`):

| series | type | what, per request that ended with a completion |
| --- | --- | --- |
| `placer:time_to_first_token_seconds` | histogram | arrival at the router → first token there (`record.ttft_s`) |
| `placer:inter_token_latency_seconds` | histogram | each gap between consecutive tokens reaching the router |
| `placer:request_time_per_output_token_seconds` | histogram | each request's mean gap (`tpot_s`: the plan's TPOT) |
| `placer:e2e_request_latency_seconds` | histogram | arrival → the last token |
| `placer:request_queue_time_seconds{role}` | histogram | the wait at each role before its work began |
| `placer:prefix_cache_queries_total{role}` | counter | prompt tokens looked up in that role's radix cache |
| `placer:prefix_cache_hits_total{role}` | counter | of which found there (not recomputed, not pulled) |

Every series carries `model_name` (vLLM's label). Buckets are vLLM's (v1 `PrometheusStatLogger`):
TTFT 1 ms … 2560 s, inter-token 10 ms … 80 s, end-to-end 0.3 s … 7680 s; queue time the same with
finer bounds from 1 ms below 0.3 s (a role's queue is milliseconds while the plan holds). Queue time by
role: P — its order's arrival → its prefill's start (`p_queue_s`, measured by P); A — the first
token's report less the order's sending and A's prefill compute (`prefill_done_after_s −
orders_sent_after_s − prefill_s`: the inbox, the scheduler's queue and steps that carried other
requests' chunks; A reports no queue time of its own); RLD and MD — the KV's wait in the decoder's
inbox before its import (`rld_kv_inbox_s`, `md_kv_inbox_s`; D on the PD baselines). Prefix hits by role: P and A — the
prefill's radix-cache hit (`record.prefix_hit_tokens`); MD — its decode-side cache's hit (DRC,
`md_cached_tokens`); RLD reports none. Failed and cancelled requests are counted by the router's
counters, not here (vLLM observes finished requests too). No torch, no HTTP.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from placer import pdd

PREFIX = "placer:"
#: vLLM's buckets (vllm/v1/metrics/loggers.py), kept so Grafana boards' quantiles mean the same.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TOKEN_GAP_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                     20.0, 40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                           120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
#: vLLM's queue buckets start at 0.3 s; a role's queue is milliseconds while the plan holds, so finer
#: bounds go below (as SGLang's `sglang:queue_time_seconds` has them): quantiles stay comparable.
QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, *REQUEST_LATENCY_BUCKETS)


def _decoder(record: Any) -> str:
    """The role of the worker that reports `md_` figures: D on the PD baselines' pipeline, else MD."""
    return pdd.D if record.pipeline == pdd.P_D else pdd.MD


def queue_times(record: Any) -> dict[str, float]:
    """Each role's queue time of one request, seconds (only the roles that served it and measured it)."""
    extra, out = record.extra, {}
    if record.pipeline == pdd.P_A:
        if all(k in extra for k in ("prefill_done_after_s", "orders_sent_after_s", "prefill_s")):
            out[pdd.AGG] = max(0.0, extra["prefill_done_after_s"] - extra["orders_sent_after_s"] - extra["prefill_s"])
    elif "p_queue_s" in extra:
        out[pdd.P] = extra["p_queue_s"]
    for role, key in ((pdd.RLD, "rld_kv_inbox_s"), (_decoder(record), "md_kv_inbox_s")):
        if key in extra:
            out[role] = extra[key]
    return out


def prefix_hits(record: Any) -> dict[str, int]:
    """Each role's radix-cache hit of one request, tokens (the roles that report one)."""
    extra, out = record.extra, {}
    if "prefill_s" in extra:  # the prefill's report arrived: P, or A on the aggregated pipeline
        out[pdd.AGG if record.pipeline == pdd.P_A else pdd.P] = record.prefix_hit_tokens
    if "md_cached_tokens" in extra:
        out[_decoder(record)] = int(extra["md_cached_tokens"])
    return out


class RequestMetrics:
    """The histograms and counters of one server (its own registry: apps in one process never share)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        model, role = ["model_name"], ["model_name", "role"]

        def hist(name: str, doc: str, labels: list[str], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(PREFIX + name, doc, labels, buckets=buckets, registry=self.registry)

        self.ttft = hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", model,
                         TTFT_BUCKETS)
        self.itl = hist("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", model,
                        TOKEN_GAP_BUCKETS)
        self.tpot = hist("request_time_per_output_token_seconds",
                         "Histogram of time_per_output_token_seconds per request.", model, TOKEN_GAP_BUCKETS)
        self.e2e = hist("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", model,
                        REQUEST_LATENCY_BUCKETS)
        self.queue = hist("request_queue_time_seconds",
                          "Histogram of time a request waited at each role before its work began.", role,
                          QUEUE_BUCKETS)
        self.cache_queries = Counter(PREFIX + "prefix_cache_queries", "Prompt tokens looked up in a role's prefix "
                                     "cache.", role, registry=self.registry)
        self.cache_hits = Counter(PREFIX + "prefix_cache_hits", "Prompt tokens found in a role's prefix cache.",
                                  role, registry=self.registry)

    def observe(self, model_name: str, stream: Any) -> None:
        """One ended request (a `RequestStream` with its record, token times, start and end)."""
        record = stream.record
        if record is None or record.error is not None:
            return
        if record.ttft_s is not None:
            self.ttft.labels(model_name).observe(record.ttft_s)
        times = stream.token_times
        itl = self.itl.labels(model_name)
        for a, b in zip(times, times[1:]):
            itl.observe(b - a)
        if record.tpot_s is not None:
            self.tpot.labels(model_name).observe(record.tpot_s)
        if stream.ended_at is not None:
            self.e2e.labels(model_name).observe(max(0.0, stream.ended_at - stream.created_at))
        for role, seconds in queue_times(record).items():
            self.queue.labels(model_name, role).observe(seconds)
        for role, hits in prefix_hits(record).items():
            self.cache_queries.labels(model_name, role).inc(record.input_tokens)
            self.cache_hits.labels(model_name, role).inc(hits)

    def text(self) -> str:
        """The Prometheus text exposition of every series."""
        return generate_latest(self.registry).decode()
