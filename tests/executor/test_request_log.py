"""The request log: batched writes, JSON Lines, the service database, and a sink that fails."""

from __future__ import annotations

import json
import time

import pytest

from executor.request_log import (
    BatchingRequestLog,
    DbSink,
    JsonlSink,
    MemorySink,
    RequestRecord,
    open_sink,
)


def rec(k: int, pipeline: str = "P-MD") -> RequestRecord:
    return RequestRecord(f"r{k}", 1.7e9 + k, input_tokens=1000, output_tokens=50, prefix_hit_tokens=900,
                         pipeline=pipeline, ttft_s=0.2, tpot_s=0.02, finish_reason="length")


def test_records_are_written_in_batches_of_batch_size():
    sink = MemorySink()
    log = BatchingRequestLog(sink, batch_size=3, flush_interval_s=60)
    for k in range(7):
        log.add(rec(k))
    assert [len(b) for b in sink.batches] == [3, 3]
    log.close()
    assert [len(b) for b in sink.batches] == [3, 3, 1]
    assert [r.request_id for r in sink.records] == [f"r{k}" for k in range(7)]


def test_a_partial_batch_goes_out_after_the_flush_interval():
    sink = MemorySink()
    log = BatchingRequestLog(sink, batch_size=100, flush_interval_s=0.1)
    log.add(rec(0))
    end = time.monotonic() + 3
    while not sink.batches and time.monotonic() < end:
        time.sleep(0.02)
    assert len(sink.records) == 1
    log.close()


def test_a_failing_sink_keeps_the_batch_for_the_next_flush():
    class Flaky(MemorySink):
        fails = 1

        def write(self, records):
            if self.fails:
                self.fails -= 1
                raise OSError("disk away")
            super().write(records)

    sink = Flaky()
    log = BatchingRequestLog(sink, batch_size=2, flush_interval_s=60)
    log.add(rec(0))
    log.add(rec(1))  # the first write fails
    assert log.write_errors == 1 and sink.records == []
    log.close()
    assert [r.request_id for r in sink.records] == ["r0", "r1"]


def test_jsonl_sink_appends_one_object_per_record(tmp_path):
    path = tmp_path / "log" / "requests.jsonl"
    log = BatchingRequestLog(open_sink(str(path)), batch_size=2)
    for k in range(3):
        log.add(rec(k, "P-RLD-MD"))
    log.close()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["request_id"] for r in rows] == ["r0", "r1", "r2"]
    assert rows[0]["pipeline"] == "P-RLD-MD" and rows[0]["prefix_hit_tokens"] == 900
    assert isinstance(open_sink(str(path)), JsonlSink)


def test_db_sink_writes_rows_the_replanner_reads(tmp_path):
    pytest.importorskip("db.request_log")
    from sqlalchemy import text

    sink = DbSink(f"sqlite:///{tmp_path / 'placer.db'}")
    log = BatchingRequestLog(sink, batch_size=2)
    for k in range(3):
        log.add(rec(k, ("P-MD", "P-RLD-MD", "P-RLD")[k]))
    engine = sink.engine
    with engine.connect() as conn:
        assert conn.execute(text("select count(*) from request_log")).scalar() == 2  # one batch so far
    log.close()
    from db import make_engine

    with make_engine(f"sqlite:///{tmp_path / 'placer.db'}").connect() as conn:
        rows = conn.execute(text("select pipeline, input_tokens, prefix_hit_tokens, ttft_s from request_log "
                                 "order by id")).fetchall()
    assert [tuple(r) for r in rows] == [("P-MD", 1000, 900, 0.2), ("P-RLD-MD", 1000, 900, 0.2),
                                        ("P-RLD", 1000, 900, 0.2)]


def test_the_jsonl_log_is_the_trace_format_every_reader_reads(tmp_path):
    """One request-log format (docs/contracts.md): the trace fields first, in arrival order when read."""
    from placer.workload import classes_from_trace, read_trace, trace_arrival_rps

    path = tmp_path / "requests.jsonl"
    log = BatchingRequestLog(open_sink(str(path)), batch_size=100)
    for k in (2, 0, 1, 3):  # written as requests end, not as they arrived
        log.add(rec(k))
    log.close()
    first = json.loads(path.read_text().splitlines()[0])
    assert first["timestamp"] == (1.7e9 + 2) * 1000 and first["input_length"] == 1000
    assert first["output_length"] == 50 and first["hit_rate"] == 0.9 and first["request_id"] == "r2"
    records = list(read_trace(path))
    assert [r.timestamp_s for r in records] == [1.7e9 + k for k in range(4)]
    assert trace_arrival_rps(path) == pytest.approx(1.0)
    [cls] = classes_from_trace(path)
    assert (cls.input_tokens, cls.output_tokens, cls.hit_rate) == (1000, 50, 0.9)


def test_a_log_written_before_the_trace_fields_is_still_read(tmp_path):
    from placer.workload import read_trace

    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(json.dumps(rec(k).to_dict()) for k in range(3)) + "\n")
    records = list(read_trace(path))
    assert [(r.input_tokens, r.output_tokens, r.hit_rate) for r in records] == [(1000, 50, 0.9)] * 3
    assert records[1].timestamp_s == pytest.approx(1.7e9 + 1)


def test_a_line_far_out_of_order_is_named(tmp_path):
    from placer.errors import InputError
    from placer.workload import read_trace

    path = tmp_path / "shuffled.jsonl"
    lines = [{"timestamp": t, "input_length": 10, "output_length": 1, "hit_rate": 0.5} for t in (10_000, 700_000, 5)]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    with pytest.raises(InputError, match="line 3: timestamp 5 ms"):
        list(read_trace(path))
