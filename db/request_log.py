"""Batched writer of the request log: the executor calls ``add`` once per served request.

in:  :class:`RequestRow` (or a mapping with its fields), from any thread — the columns of
     one request record (``placer.records.RequestRecord``, which the executor's DbSink maps)
out: rows in ``request_log``, inserted in batches of ``batch_size`` or every
     ``flush_interval_s`` seconds, whichever comes first; ``close()`` writes the rest.

A failed insert (database briefly away) keeps the batch and retries on the next tick;
past ``max_buffered`` records the oldest are dropped and counted in ``dropped``, so a
dead database never grows the serving process without bound.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Engine

from db.models import RequestLog

log = logging.getLogger(__name__)

PIPELINE_CHARS = 16  # the column's width

@dataclass(frozen=True)
class RequestRow:
    """One served request as the ``request_log`` table stores it (plain data: the pipeline's
    name is checked by the record upstream, ``placer.records.RequestRecord``)."""

    arrival_at: datetime  # timezone-aware; a float is read as epoch seconds
    input_tokens: int
    output_tokens: int
    prefix_hit_tokens: int
    pipeline: str
    ttft_s: float | None = None
    tpot_s: float | None = None
    request_class: str | None = None
    deployment_id: int | None = None

    def row(self) -> dict[str, Any]:
        return asdict(self)


_FIELDS = {f.name for f in fields(RequestRow)}


def as_row(record: RequestRow | Mapping[str, Any]) -> RequestRow:
    """Validate a record; ValueError names the bad field and value."""
    if isinstance(record, RequestRow):
        data = record.row()
    else:
        unknown = set(record) - _FIELDS
        if unknown:
            raise ValueError(f"request record: unknown field(s) {', '.join(sorted(unknown))}")
        data = dict(record)
    arrival = data.get("arrival_at")
    if isinstance(arrival, (int, float)) and not isinstance(arrival, bool):
        arrival = datetime.fromtimestamp(float(arrival), tz=timezone.utc)
    if not isinstance(arrival, datetime) or arrival.tzinfo is None:
        raise ValueError(f"request record: arrival_at must be a timezone-aware datetime, got {arrival!r}")
    data["arrival_at"] = arrival
    for name in ("input_tokens", "output_tokens", "prefix_hit_tokens"):
        value = data.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"request record: {name} must be an integer >= 0, got {value!r}")
    if data["prefix_hit_tokens"] > data["input_tokens"]:
        raise ValueError(f"request record: prefix_hit_tokens ({data['prefix_hit_tokens']}) exceeds "
                         f"input_tokens ({data['input_tokens']})")
    pipeline = data.get("pipeline")
    if not isinstance(pipeline, str) or not 0 < len(pipeline) <= PIPELINE_CHARS:
        raise ValueError(f"request record: pipeline must be a name of 1 to {PIPELINE_CHARS} characters, "
                         f"got {pipeline!r}")
    for name in ("ttft_s", "tpot_s"):
        value = data.get(name)
        if value is not None and (not isinstance(value, (int, float)) or value < 0):
            raise ValueError(f"request record: {name} must be a number >= 0, got {value!r}")
    return RequestRow(**data)


class RequestLogWriter:
    """Buffer request records and insert them in batches from a background thread."""

    def __init__(self, engine: Engine, batch_size: int = 500, flush_interval_s: float = 1.0,
                 max_buffered: int = 100_000):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if flush_interval_s <= 0:
            raise ValueError(f"flush_interval_s must be > 0, got {flush_interval_s}")
        self._engine = engine
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_buffered = max(max_buffered, batch_size)
        self._buffer: deque[dict[str, Any]] = deque()
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._closed = False
        self.written = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._loop, name="request-log-writer", daemon=True)
        self._thread.start()

    def add(self, record: RequestRow | Mapping[str, Any]) -> None:
        row = as_row(record).row()
        with self._cond:
            if self._closed:
                raise RuntimeError("RequestLogWriter is closed")
            self._buffer.append(row)
            while len(self._buffer) > self.max_buffered:
                self._buffer.popleft()
                self.dropped += 1
            if len(self._buffer) >= self.batch_size:
                self._cond.notify()

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._buffer)

    def flush(self) -> int:
        """Write everything buffered now; returns the rows written (0 if the insert failed)."""
        written = 0
        with self._write_lock:
            while True:
                with self._cond:
                    batch = [self._buffer.popleft() for _ in range(min(self.batch_size, len(self._buffer)))]
                if not batch:
                    return written
                try:
                    with self._engine.begin() as conn:
                        conn.execute(RequestLog.__table__.insert(), batch)
                except Exception:  # the database is away: keep the batch for the next tick
                    log.exception("request log: insert of %d rows failed; will retry", len(batch))
                    with self._cond:
                        self._buffer.extendleft(reversed(batch))
                    return written
                written += len(batch)
                self.written += len(batch)

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._closed and len(self._buffer) < self.batch_size:
                    self._cond.wait(self.flush_interval_s)
                closed = self._closed
            self.flush()
            if closed:
                return

    def close(self) -> None:
        """Stop accepting records, write what is buffered, stop the thread."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify()
        self._thread.join()
        self.flush()

    def __enter__(self) -> RequestLogWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
