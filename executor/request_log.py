"""The request log: one record per served request, written in batches to a sink.

In: `RequestRecord`s (`placer.records`, the one definition) from the router as
requests end. Out: batches handed to a `RequestLogSink` — a JSON Lines file (`JsonlSink`, the
request-log format of docs/contracts.md, which every trace reader reads), memory (`MemorySink`, tests), or
the service's database table through `DbSink` when `db.request_log` is installed —
so scheduled replanning can fit the workload the system actually saw.

`BatchingRequestLog` buffers records and writes a batch when `batch_size` records
are waiting or `flush_interval_s` has passed since the oldest (a background thread),
and on `flush`/`close`. A sink that raises does not lose the batch: it is kept and
retried at the next flush (counted in `write_errors`). No torch here.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from placer.records import RequestRecord
from placer.workload.trace import request_log_line

log = logging.getLogger("executor.request_log")


class RequestLogSink(Protocol):
    """Where batches of records go."""

    def write(self, records: Sequence[RequestRecord]) -> None: ...

    def close(self) -> None: ...


class MemorySink:
    """Keeps every batch (tests, benchmarks)."""

    def __init__(self) -> None:
        self.batches: list[list[RequestRecord]] = []

    def write(self, records: Sequence[RequestRecord]) -> None:
        self.batches.append(list(records))

    @property
    def records(self) -> list[RequestRecord]:
        return [r for b in self.batches for r in b]

    def close(self) -> None:
        pass


class JsonlSink:
    """Appends one JSON object per record to a file: the request-log line of docs/contracts.md
    (`placer.workload.trace.request_log_line`: the trace fields `timestamp` ms, `input_length`,
    `output_length`, `hit_rate`, then the record's own), so `placer workload fit`, `placer simulate
    --trace` and a replanning job's `--request-log FILE` read the file as written."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, records: Sequence[RequestRecord]) -> None:
        with self.path.open("a") as f:
            for r in records:
                f.write(json.dumps(request_log_line(r), separators=(",", ":")) + "\n")

    def close(self) -> None:
        pass


class DbSink:
    """Adapter to the service's request-log table through `db.RequestLogWriter`.

    `url` is a database URL (default: the service's — `placer.settings.Settings`:
    `PLACER_DATABASE_URL` or its SQLite file); the schema is migrated on open. Each batch is handed to the writer
    and flushed at once (this log already batches); an insert that fails stays in
    the writer, which retries it. Records that fail the table's
    checks are skipped and counted in `rejected`.
    """

    def __init__(self, url: str | None = None, deployment_id: int | None = None) -> None:
        try:
            import db
            from db.request_log import RequestLogWriter
        except ImportError as exc:
            raise RuntimeError(f"the service database (db.request_log) is not available: {exc}") from exc
        from placer.settings import Settings

        self.engine, _ = db.connect(url or Settings.from_env().database_url)
        self._writer = RequestLogWriter(self.engine, flush_interval_s=1.0)
        self.deployment_id = deployment_id
        self.rejected = 0

    def row(self, r: RequestRecord) -> dict[str, Any]:
        return {"arrival_at": r.arrival_unix_s, "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                "prefix_hit_tokens": min(r.prefix_hit_tokens, r.input_tokens), "pipeline": r.pipeline,
                "ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "request_class": r.request_class,
                "deployment_id": self.deployment_id}

    def write(self, records: Sequence[RequestRecord]) -> None:
        for r in records:
            try:
                self._writer.add(self.row(r))
            except ValueError:
                log.warning("request log: record %s rejected by the database writer", r.request_id)
                self.rejected += 1
        self._writer.flush()  # a failed insert stays in the writer, which retries every second

    def close(self) -> None:
        self._writer.close()
        self.engine.dispose()


def open_sink(spec: str) -> RequestLogSink:
    """`db` or `db:URL` → `DbSink`; anything else is a JSON Lines path."""
    if spec == "db" or spec.startswith("db:"):
        return DbSink(spec[3:] or None)
    return JsonlSink(spec)


class BatchingRequestLog:
    """Buffers records and writes them to `sink` in batches."""

    def __init__(self, sink: RequestLogSink, batch_size: int = 64, flush_interval_s: float = 1.0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if flush_interval_s <= 0:
            raise ValueError(f"flush_interval_s must be > 0, got {flush_interval_s}")
        self.sink, self.batch_size, self.flush_interval_s = sink, batch_size, flush_interval_s
        self._buffer: list[RequestRecord] = []
        self._oldest: float | None = None
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self.batches_written = 0
        self.records_written = 0
        self.write_errors = 0
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)
        self._thread.start()

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self._buffer.append(record)
            if self._oldest is None:
                self._oldest = time.monotonic()
            full = len(self._buffer) >= self.batch_size
        if full:
            self.flush()

    def flush(self) -> None:
        with self._write_lock:
            with self._lock:
                batch, self._buffer, self._oldest = self._buffer, [], None
            if not batch:
                return
            try:
                self.sink.write(batch)
            except Exception:
                log.exception("request log: writing %d records failed; keeping them", len(batch))
                self.write_errors += 1
                with self._lock:
                    self._buffer = batch + self._buffer
                    self._oldest = self._oldest or time.monotonic()
                return
            self.batches_written += 1
            self.records_written += len(batch)

    def _run(self) -> None:
        while not self._stop.wait(min(0.1, self.flush_interval_s)):
            with self._lock:
                due = self._oldest is not None and time.monotonic() - self._oldest >= self.flush_interval_s
            if due:
                self.flush()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.flush()
        self.sink.close()
