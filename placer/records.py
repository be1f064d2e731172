"""The request log's record: what one served request looked like.

in:  the executor's router, as each request ends (or a JSON line of a request log)
out: :class:`RequestRecord`, validated once (a bad field raises ValueError naming it and
     its value: token counts whole in [0, MAX_TOKENS], times finite and bounded);
     ``to_dict`` / ``from_dict`` are its JSON-lines form.

One definition for the executor that writes it (``placer deploy --request-log``), the
sinks that store it (a JSON Lines file, or the service database's ``request_log`` table,
whose row is ``db.request_log.RequestRow``) and the replanning that reads it back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from placer.fields import MAX_TIMESTAMP_S, MAX_TOKENS
from placer.pdd import PIPELINES

#: Longest latency a record may carry: a day (a request waits at most the router's timeouts).
MAX_LATENCY_S = 86_400.0


@dataclass(frozen=True)
class RequestRecord:
    """One served request (units in the names)."""

    request_id: str
    arrival_unix_s: float  # when the router received it
    input_tokens: int
    output_tokens: int
    prefix_hit_tokens: int  # P's radix-cache hit at prefill
    pipeline: str  # one of placer.flows.PIPELINES
    ttft_s: float | None = None  # arrival → first token at the router
    tpot_s: float | None = None  # mean gap between later tokens
    finish_reason: str | None = None  # stop | length | error
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # instances, DRC hit, handoff figures
    request_class: str | None = None  # the scenario's class, when the router knows it

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "prefix_hit_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_TOKENS:
                raise ValueError(f"request record: {name} must be an integer in [0, {MAX_TOKENS}], got {value!r}")
        if not isinstance(self.request_id, str) or len(self.request_id) > 1000:
            raise ValueError(f"request record: request_id must be a string of at most 1000 characters, "
                             f"got {str(self.request_id)[:60]!r}")
        if self.pipeline not in PIPELINES:
            raise ValueError(f"request record: pipeline must be one of {', '.join(PIPELINES)}, "
                             f"got {self.pipeline!r}")
        if not (_finite(self.arrival_unix_s) and abs(self.arrival_unix_s) <= MAX_TIMESTAMP_S):
            raise ValueError(f"request record: arrival_unix_s must be a finite number within ±{MAX_TIMESTAMP_S:g}, "
                             f"got {self.arrival_unix_s!r}")
        for name in ("ttft_s", "tpot_s"):
            value = getattr(self, name)
            if value is not None and not (_finite(value) and 0 <= value <= MAX_LATENCY_S):
                raise ValueError(f"request record: {name} must be a number in [0, {MAX_LATENCY_S:g}] or null, "
                                 f"got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestRecord:
        """A record from its JSON form; unknown or missing fields are named in the ValueError."""
        if not isinstance(data, Mapping):
            raise ValueError(f"request record: must be an object, got {type(data).__name__}")
        unknown = set(data) - _FIELDS
        if unknown:
            raise ValueError(f"request record: unknown field(s) {', '.join(sorted(unknown))}")
        missing = _REQUIRED - set(data)
        if missing:
            raise ValueError(f"request record: missing field(s) {', '.join(sorted(missing))}")
        return cls(**data)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_FIELDS = {f.name for f in fields(RequestRecord)}
_REQUIRED = {f.name for f in fields(RequestRecord) if f.default is MISSING and f.default_factory is MISSING}


def request_log_line(record: Any) -> dict[str, Any]:
    """One request-log line for a served request (a :class:`RequestRecord`): the
    trace fields of the contract first, then every field of the record."""
    n_in = record.input_tokens
    hit = min(record.prefix_hit_tokens, n_in) / n_in if n_in > 0 else 0.0
    return {"timestamp": round(record.arrival_unix_s * 1000.0, 3), "input_length": n_in,
            "output_length": record.output_tokens, "hit_rate": round(hit, 6), **record.to_dict()}
