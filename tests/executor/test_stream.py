"""Stream assembly across the handoff seam, and the client's side of a request (pure: no torch, no sockets)."""

from __future__ import annotations

import pytest

from executor.routing import Pipeline
from executor.stream import RequestStream, StreamAssembler, StreamEvent


def test_stream_assembler_orders_and_drops_duplicates_across_the_seam():
    a = StreamAssembler()
    assert a.add(0, [10, 11, 12]) == [10, 11, 12]  # RLD
    assert a.add(5, [15, 16]) == []  # MD's tokens arrive before RLD's last ones
    assert a.missing == [3, 4]
    assert a.add(3, [13, 14]) == [13, 14, 15, 16]
    assert a.add(4, [14, 15]) == []  # duplicates are dropped...
    assert a.duplicates == 2 and a.conflicts == 0
    a.add(6, [99])
    assert a.conflicts == 1  # ... and a different token at a seen index is counted
    assert a.add(7, [17], finish_reason="length") == [17]
    assert a.done and a.delivered == [10, 11, 12, 13, 14, 15, 16, 17]


def test_a_request_stream_ends_with_its_end_or_its_error():
    done = RequestStream("r1", Pipeline.P_MD, loop=None)
    for k, tok in enumerate([7, 8]):
        done.push(StreamEvent("token", k, tok))
    done.push(StreamEvent("end", finish_reason="length"))
    assert [e.kind for e in done.events(timeout_s=1)] == ["token", "token", "end"]
    assert done.result(timeout_s=1) == [7, 8] and done.finish_reason == "length"
    failed = RequestStream("r2", Pipeline.P_MD, loop=None)
    failed.push(StreamEvent("error", error="md0 is down"))
    with pytest.raises(RuntimeError, match="md0 is down"):
        failed.result(timeout_s=1)


def test_request_stream_keeps_when_each_token_and_the_end_arrived():
    """What the latency histograms observe: a time per token, in order, and the end after them."""
    s = RequestStream("r", Pipeline.P_MD, None)
    for i, tok in enumerate((5, 6, 7)):
        s.push(StreamEvent("token", i, tok))
    assert s.ended_at is None
    s.push(StreamEvent("end", finish_reason="length"))
    assert len(s.token_times) == 3 and s.created_at <= s.token_times[0] <= s.token_times[-1] <= s.ended_at
