"""Router counters and request latencies as Prometheus text (what `GET /metrics` answers a scraper).

In: a router's `stats()` (or, for a fleet, each model's), and the server's `RequestMetrics`
(`executor.latency_metrics`). Out: the text exposition — one counter per `PROMETHEUS_COUNTERS`
entry, `placer_requests_live`, and `placer_instance_up` per instance (1 UP, 0.5 SUSPECT, 0 DOWN);
in a fleet these carry a `model` label — then the vLLM-named latency histograms and prefix-cache
counters (`placer:time_to_first_token_seconds`, …, labelled `model_name` as vLLM's are).
"""

from __future__ import annotations

from typing import Any

PROMETHEUS_COUNTERS = {  # router counter → (metric, help)
    "completed": ("placer_requests_completed_total", "Requests that ended with a completion."),
    "failed": ("placer_requests_failed_total", "Requests that ended with an error event."),
    "migrations": ("placer_migrations_total", "Requests moved mid-stream to another instance."),
    "fallbacks": ("placer_fallbacks_total", "Requests served by RLD in place of an MD pipeline."),
    "set_fallbacks": ("placer_set_fallbacks_total",
                      "Requests prefilled outside their P set queue: none of its instances was up."),
    "retries": ("placer_retries_total", "Attempts restarted before the first token reached the client."),
    "failures_after_first_token": ("placer_failures_after_first_token_total",
                                   "Requests failed (not retried) after tokens reached the client."),
    "stalls": ("placer_stalls_total", "Attempts that made no progress within the stall deadline."),
    "rejected_overloaded": ("placer_rejected_overloaded_total", "Requests refused with 429."),
    "rejected_no_capacity": ("placer_rejected_no_capacity_total", "Requests refused with 503."),
    "cancelled": ("placer_requests_cancelled_total", "Requests whose client went away before the end."),
    "peers_down": ("placer_peers_down_total", "Instances marked DOWN."),
    "peers_recovered": ("placer_peers_recovered_total", "DOWN instances that answered again."),
    "orders_undelivered": ("placer_orders_undelivered_total", "Orders that could not be delivered."),
}


def _labels(model: str | None, **more: str) -> str:
    pairs = ({"model": model} if model is not None else {}) | more
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}" if pairs else ""


def prometheus_text(stats: dict[str, Any] | dict[str | None, dict[str, Any]], *, by_model: bool = False,
                    latency: Any = None) -> str:
    """Router stats → Prometheus text exposition (counters, live gauge, per-instance health).
    `by_model`: `stats` maps each model to its router's stats and every series carries `model`.
    `latency`: a `RequestMetrics` whose histograms and counters follow."""
    per_model = stats if by_model else {None: stats}
    lines = []
    for key, (metric, help_) in PROMETHEUS_COUNTERS.items():
        lines += [f"# HELP {metric} {help_}", f"# TYPE {metric} counter"]
        lines += [f"{metric}{_labels(m)} {int(st.get(key, 0))}" for m, st in per_model.items()]
    lines += ["# HELP placer_requests_live Requests in flight.", "# TYPE placer_requests_live gauge"]
    lines += [f"placer_requests_live{_labels(m)} {int(st.get('live', 0))}" for m, st in per_model.items()]
    lines += ["# HELP placer_instance_up 1 UP, 0.5 SUSPECT, 0 DOWN.", "# TYPE placer_instance_up gauge"]
    up = {"up": 1, "suspect": 0.5, "down": 0}
    for m, st in per_model.items():
        for name, state in sorted(st.get("health", {}).items()):
            lines.append(f"placer_instance_up{_labels(m, instance=name)} {up[state]}")
    return "\n".join(lines) + "\n" + (latency.text() if latency is not None else "")
