"""Fit a replanning job's workload from its source: a trace file or the request log.

in:  a :class:`~placer.service.jobs.specs.TraceSource` or :class:`~placer.service.jobs.specs.RequestLogSource`,
     the scenario's options (for the anomalous-traffic thresholds)
out: the ``workload`` mapping of a scenario (``arrival_rps`` + fitted ``classes``), or
     None when the window (of the request log, or of a file given one) holds too few requests

The class fitting itself is :func:`placer.workload.fit_classes`, the same one a
scenario's ``workload.trace`` goes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from db import repo
from placer.service.jobs.specs import RequestLogSource, TraceSource
from placer.specs import OptionsSpec
from placer.workload import fit_classes, read_trace, trace_arrival_rps, with_hit_rates


@dataclass(frozen=True)
class FittedWorkload:
    workload: dict[str, Any]  # {"arrival_rps": float, "classes": [RequestClass as dict]}
    requests: int  # how many requests the fit saw
    source: str  # words for the run record

    def record(self) -> dict[str, Any]:
        return {**self.workload, "requests": self.requests, "source": self.source}


def _thresholds(options: dict[str, Any]) -> dict[str, Any]:
    opts = OptionsSpec.model_validate(options or {})
    return {"filter_max_output_tokens": opts.filter_max_output_tokens,
            "filter_max_hit_rate": opts.filter_max_hit_rate,
            "filter_min_input_tokens": opts.filter_min_input_tokens}


def _workload(classes, arrival_rps: float) -> dict[str, Any]:
    return {"arrival_rps": arrival_rps, "classes": [c.model_dump() for c in classes]}


#: Timestamps past this many seconds are Unix times (a request log's), not offsets from a trace's start.
UNIX_TIME_S = 1e9  # 2001-09-09


def fit_trace(source: TraceSource, options: dict[str, Any], now: datetime | None = None) -> FittedWorkload | None:
    """Classes and arrival rate of a JSONL trace or request log (InputError for a bad or missing file).

    With ``source.window_s``: only the requests of the last window — ending ``now`` for a request
    log (Unix timestamps), at the newest request for a trace — and None when fewer than
    ``source.min_requests`` fall in it. Hit rates are worked out over the whole file first (the
    cache the earlier requests warmed)."""
    if source.window_s is None:
        records = list(with_hit_rates(read_trace(source.path)))
        classes = fit_classes(records, **_thresholds(options))
        rps = trace_arrival_rps(source.path)
        return FittedWorkload(_workload(classes, rps), len(records), f"trace {source.path}")
    records = list(with_hit_rates(read_trace(source.path)))
    newest = max((r.timestamp_s for r in records), default=0.0)
    end = (now or datetime.now(timezone.utc)).timestamp() if newest > UNIX_TIME_S else newest
    kept = [r for r in records if end - source.window_s <= r.timestamp_s <= end]
    if len(kept) < max(2, source.min_requests):
        return None
    span_s = kept[-1].timestamp_s - kept[0].timestamp_s
    rps = (len(kept) - 1) / span_s if span_s > 0 else len(kept) / source.window_s
    classes = fit_classes(kept, **_thresholds(options))
    return FittedWorkload(_workload(classes, rps), len(kept), f"{source.path}, last {source.window_s:g} s")


def fit_request_log(source: RequestLogSource, options: dict[str, Any], factory: sessionmaker[Session],
                    now: datetime) -> FittedWorkload | None:
    """Classes and arrival rate of the requests served in the last ``window_s`` seconds.

    The rate is requests / covered seconds, where the covered span is the window, or
    less when the first logged request is younger than the window (a service that
    started inside it), never under one second.
    """
    start = now - timedelta(seconds=source.window_s)
    with factory() as session:
        rows = repo.request_window(session, start, now, source.deployment_id)
        records = [{"input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                    "hit_rate": min(1.0, r.prefix_hit_tokens / r.input_tokens) if r.input_tokens else 0.0}
                   for r in rows if r.input_tokens > 0]
        first = rows[0].arrival_at if rows else None
    if len(records) < source.min_requests:
        return None
    covered_s = min(source.window_s, max(1.0, (now - first).total_seconds()))
    classes = fit_classes(records, **_thresholds(options))
    return FittedWorkload(_workload(classes, len(records) / covered_s), len(records),
                          f"request log, last {source.window_s:g} s")
