"""The batched request-log writer: batches by size and by time, loses nothing on close,
survives a database that is briefly away, rejects malformed records up front."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select

from db.models import RequestLog
from db.request_log import RequestLogWriter, RequestRow

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=timezone.utc)


def _record(i: int) -> RequestRow:
    return RequestRow(arrival_at=T0 + timedelta(milliseconds=i), input_tokens=1000 + i, output_tokens=50,
                         prefix_hit_tokens=900, pipeline="P-RLD-MD" if i % 2 else "P-MD", ttft_s=0.5, tpot_s=0.02)


def _count(factory) -> int:
    with factory() as s:
        return s.scalar(select(func.count()).select_from(RequestLog))


def test_close_writes_every_record(factory):
    engine = factory.kw["bind"]
    writer = RequestLogWriter(engine, batch_size=64, flush_interval_s=60)
    for i in range(1000):
        writer.add(_record(i))
    writer.close()
    assert _count(factory) == 1000 and writer.written == 1000 and writer.dropped == 0
    with factory() as s:
        row = s.scalar(select(RequestLog).where(RequestLog.input_tokens == 1007))
    assert row.pipeline == "P-RLD-MD" and row.arrival_at == T0 + timedelta(milliseconds=7)


def test_a_full_batch_is_written_without_waiting_for_the_interval(factory):
    writer = RequestLogWriter(factory.kw["bind"], batch_size=10, flush_interval_s=60)
    try:
        for i in range(10):
            writer.add(_record(i))
        deadline = time.monotonic() + 5
        while _count(factory) < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _count(factory) == 10
    finally:
        writer.close()


def test_a_partial_batch_is_written_after_the_interval(factory):
    writer = RequestLogWriter(factory.kw["bind"], batch_size=1000, flush_interval_s=0.1)
    try:
        for i in range(3):
            writer.add({"arrival_at": (T0 + timedelta(seconds=i)).timestamp(), "input_tokens": 10,
                        "output_tokens": 1, "prefix_hit_tokens": 0, "pipeline": "P-MD"})
        deadline = time.monotonic() + 5
        while _count(factory) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _count(factory) == 3
    finally:
        writer.close()


def test_records_survive_a_failed_insert_and_are_written_later(factory, monkeypatch):
    engine = factory.kw["bind"]
    writer = RequestLogWriter(engine, batch_size=5, flush_interval_s=60)
    real_begin = engine.begin
    calls = {"n": 0}

    def flaky_begin():
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("database restarting")
        return real_begin()

    monkeypatch.setattr(engine, "begin", flaky_begin)
    for i in range(5):
        writer.add(_record(i))
    writer.close()
    assert _count(factory) == 5 and calls["n"] >= 2


@pytest.mark.parametrize("bad, field", [
    ({"input_tokens": -1}, "input_tokens"),
    ({"prefix_hit_tokens": 5000}, "prefix_hit_tokens"),
    ({"pipeline": ""}, "pipeline"),
    ({"pipeline": "P-RLD-MD-and-more-than-16"}, "pipeline"),
    ({"arrival_at": datetime(2026, 1, 1)}, "arrival_at"),
    ({"ttft_s": -0.1}, "ttft_s"),
])
def test_malformed_records_are_rejected_naming_the_field(factory, bad, field):
    record = {"arrival_at": T0, "input_tokens": 100, "output_tokens": 1, "prefix_hit_tokens": 10,
              "pipeline": "P-MD", **bad}
    with RequestLogWriter(factory.kw["bind"]) as writer:
        with pytest.raises(ValueError, match=field):
            writer.add(record)
    assert _count(factory) == 0


def test_add_after_close_is_an_error(factory):
    writer = RequestLogWriter(factory.kw["bind"])
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.add(_record(0))
