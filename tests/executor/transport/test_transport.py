"""Channels: typed versioned messages, transfer states and deadlines, the fake, TCP and the shaped WAN."""

from __future__ import annotations

import json
import random
import statistics
import threading
import time

import pytest

from executor.transport.base import PeerInfo, Transfer, TransferState
from executor.transport.fake import FakeNetwork
from executor.transport.link import LinkEmulator
from executor.transport.messages import (
    HandoffTokens,
    KVData,
    MessageError,
    RelayOrder,
    Tokens,
    decode,
    encode,
)
from executor.transport.shaping import LineClock, LinkShape, TokenBucket
from executor.transport.tcp import Directory, TcpEndpoint

# ---- messages ---------------------------------------------------------------------------


def _envelope(data: bytes) -> dict:
    n = int.from_bytes(data[:4], "big")
    return json.loads(data[4 : 4 + n])


def _reencode(env: dict, body: bytes = b"") -> bytes:
    raw = json.dumps(env).encode()
    return len(raw).to_bytes(4, "big") + raw + body


def test_messages_round_trip_by_field_name_with_their_body():
    kv = KVData("r1", 8, 24, first_token=7, num_cached_tokens=8, payload=b"\x00\x01kv")
    back = decode(encode(kv))
    assert back == kv and back.payload == b"\x00\x01kv"
    h = HandoffTokens("r1", 1, [5, 6, 7], final=True, streamed_upto=3, mode="one-shot")
    assert decode(encode(h)) == h
    env = _envelope(encode(h))
    assert env["type"] == "HandoffTokens" and env["version"] == 1 and env["fields"]["tokens"] == [5, 6, 7]


def test_a_reader_ignores_fields_it_does_not_know_and_fills_defaults():
    env = _envelope(encode(Tokens("r1", 0, [1], "md0")))
    env["fields"]["added_in_a_later_version"] = {"x": 1}
    del env["fields"]["info"]  # an older sender had no info field
    msg = decode(_reencode(env))
    assert msg == Tokens("r1", 0, [1], "md0")


@pytest.mark.parametrize("change, error", [
    (lambda e: e.update(version=2), "version 2 is newer"),
    (lambda e: e.update(type="Teleport"), "unknown message type 'Teleport'"),
    (lambda e: e["fields"].pop("request_id"), "missing or bad fields"),
])
def test_bad_messages_are_refused_with_a_named_reason(change, error):
    env = _envelope(encode(RelayOrder("r1", [1, 2], {}, "p0", "md0", "router")))
    change(env)
    with pytest.raises(MessageError, match=error):
        decode(_reencode(env))


def test_truncated_bytes_are_refused():
    with pytest.raises(MessageError, match="too short"):
        decode(b"\x00\x01")
    with pytest.raises(MessageError, match="exceeds"):
        decode(encode(Tokens("r", 0, [1], "x"))[:10])


# ---- transfers and the fake channel ---------------------------------------------------------


def test_transfer_states_and_deadline():
    t = Transfer("a", "b", Tokens("r", 0, [], "a"), 10, deadline_s=0.05)
    seen = []
    t.on_finish(lambda tr: seen.append(tr.state))
    assert t.poll() is TransferState.PENDING
    t.progress(4)
    assert t.poll() is TransferState.TRANSFERRING
    time.sleep(0.07)
    assert t.poll() is TransferState.FAILED and "deadline exceeded" in t.error
    assert seen == [TransferState.FAILED]
    t.done()  # too late: a finished transfer keeps its state
    assert t.state is TransferState.FAILED


def test_fake_channel_manual_delivery_and_injected_faults():
    net = FakeNetwork(auto=False)
    a, b = net.endpoint("a"), net.endpoint("b", "dc-b")
    got = []
    b.set_handler(lambda src, msg: got.append((src, msg)))
    t = a.send("b", Tokens("r", 0, [1, 2], "a"))
    assert t.poll() is TransferState.PENDING and got == []
    assert net.deliver() == 1
    assert t.poll() is TransferState.DONE and got == [("a", Tokens("r", 0, [1, 2], "a"))]
    net.fail_next("b")
    assert a.send("b", Tokens("r", 2, [3], "a")).poll() is TransferState.FAILED
    assert a.send("nobody", Tokens("r", 2, [3], "a")).poll() is TransferState.FAILED
    net.drop("b")
    lost = a.send("b", Tokens("r", 2, [3], "a"), deadline_s=0.01)
    time.sleep(0.02)
    assert lost.poll() is TransferState.FAILED and net.deliver() == 0


# ---- shaping arithmetic -----------------------------------------------------------------------


def test_token_bucket_paces_to_the_rate_in_call_order():
    bucket = TokenBucket(bytes_per_s=1000, burst_bytes=100, now=0.0)
    assert bucket.reserve(100, 0.0) == 0.0  # the burst
    assert bucket.reserve(100, 0.0) == pytest.approx(0.1)
    assert bucket.reserve(100, 0.0) == pytest.approx(0.2)  # a second flow queues behind the first
    assert bucket.reserve(50, 1.0) == 0.0  # refilled (to at most the burst) after a pause


def test_line_clock_keeps_the_rate_whenever_its_caller_wakes():
    line = LineClock(bytes_per_s=1000, now=0.0)
    assert line.send(100, 0.0) == pytest.approx((0.0, 0.1))
    assert line.send(100, 0.0) == pytest.approx((0.1, 0.2))  # a second flow queues behind the first
    # the relay woke late (say at 0.5) for a frame ready at 0.15: on the line it still went at 0.2
    assert line.send(100, 0.15) == pytest.approx((0.2, 0.3))
    assert line.send(100, 1.0) == pytest.approx((1.0, 1.1))  # an idle line sends a frame when it is ready
    with pytest.raises(ValueError, match="bytes_per_s"):
        LineClock(0)


def test_link_shape_delay_jitter_and_loss():
    rng = random.Random(1)
    plain = LinkShape(1.0, rtt_ms=40)
    assert plain.arrival_delay_s(1000, rng) == (0.02, 0)
    jittery = LinkShape(1.0, rtt_ms=40, jitter_ms=5)
    delays = [jittery.arrival_delay_s(1000, rng)[0] for _ in range(2000)]
    assert min(delays) >= 0 and statistics.mean(delays) == pytest.approx(0.02, abs=0.001)
    assert statistics.stdev(delays) == pytest.approx(0.005, rel=0.1)
    lossy = LinkShape(1.0, rtt_ms=40, loss=0.01)
    runs = [lossy.arrival_delay_s(64 * 1024, rng) for _ in range(500)]
    assert any(resent for _, resent in runs)
    assert max(d for d, _ in runs) >= 0.02 + lossy.rto_s
    with pytest.raises(ValueError, match="gbit_per_s"):
        LinkShape(0, 10)
    with pytest.raises(ValueError, match="loss"):
        LinkShape(1, 10, loss=1.0)


# ---- sockets ---------------------------------------------------------------------------------


class Inbox:
    def __init__(self) -> None:
        self.items: list = []
        self.event = threading.Event()

    def __call__(self, src, msg) -> None:
        self.items.append((src, msg, time.monotonic()))
        self.event.set()

    def wait(self, n: int, timeout_s: float = 10.0) -> list:
        end = time.monotonic() + timeout_s
        while len(self.items) < n and time.monotonic() < end:
            time.sleep(0.002)
        return self.items


@pytest.fixture
def net():
    """Endpoints a (dc-a), b (dc-b), c (dc-a), and a shaped line between the datacenters."""
    made = []

    def make(shape: LinkShape | None = None, fast_path: bool = False):
        d = Directory()
        if shape is not None:
            emu = LinkEmulator("dc-a", "dc-b", shape)
            addr = emu.start()
            made.append(emu)
            d.add_link("dc-a", "dc-b", addr)
            d.add_link("dc-b", "dc-a", addr)
        eps = {}
        for name, dc in (("a", "dc-a"), ("b", "dc-b"), ("c", "dc-a")):
            ep = TcpEndpoint(name, dc, d, local_fast_path=fast_path)
            ep.start()
            d.add(PeerInfo(name, dc, ep.address))
            eps[name] = ep
            made.append(ep)
        return eps, d

    yield make
    for x in made:
        x.close()


def test_in_dc_tcp_delivers_large_messages_intact_and_reports_done(net):
    eps, _ = net()
    inbox = Inbox()
    eps["c"].set_handler(inbox)
    payload = bytes(random.Random(0).randbytes(1_000_000))
    t = eps["a"].send("c", KVData("r", 0, 10, 1, 0, payload))
    assert t.wait(10) is TransferState.DONE
    (src, msg, _), = inbox.wait(1)
    assert src == "a" and msg.payload == payload
    assert t.bytes_sent == t.bytes_total > 1_000_000


def test_unknown_or_dead_peers_fail_the_transfer(net):
    eps, d = net()
    assert eps["a"].send("ghost", Tokens("r", 0, [], "a")).wait(5) is TransferState.FAILED
    d.add(PeerInfo("gone", "dc-a", "127.0.0.1:1"))  # nothing listens there
    t = eps["a"].send("gone", Tokens("r", 0, [], "a"))
    assert t.wait(5) is TransferState.FAILED and "cannot connect" in t.error


def test_wan_line_adds_its_one_way_delay(net):
    eps, _ = net(LinkShape(1.0, rtt_ms=60))
    inbox = Inbox()
    eps["b"].set_handler(inbox)
    sent = time.monotonic()
    t = eps["a"].send("b", Tokens("r", 0, [1], "a"))
    (_, _, arrived), = inbox.wait(1)
    assert 0.03 <= arrived - sent < 0.2
    assert t.wait(5) is TransferState.DONE
    assert t.elapsed_s >= 0.06  # DONE needs the acknowledgement back: a whole round trip


def test_wan_line_rate_is_shared_by_concurrent_transfers(net):
    shape = LinkShape(0.04, rtt_ms=10)  # 5 MB/s
    eps, _ = net(shape)
    inbox = Inbox()
    eps["b"].set_handler(inbox)
    size = 500_000
    t0 = time.monotonic()
    alone = eps["a"].send("b", KVData("r0", 0, 1, 1, 0, bytes(size)))
    assert alone.wait(10) is TransferState.DONE
    alone_s = time.monotonic() - t0
    burst = 70_000  # slack: at most one chunk
    assert alone_s >= (size - burst) / shape.bytes_per_s + 0.01
    t1 = time.monotonic()
    pair = [eps["a"].send("b", KVData("r1", 0, 1, 1, 0, bytes(size))),
            eps["c"].send("b", KVData("r2", 0, 1, 1, 0, bytes(size)))]
    assert all(t.wait(10) is TransferState.DONE for t in pair)
    both_s = time.monotonic() - t1
    assert both_s >= (2 * size - burst) / shape.bytes_per_s  # one bucket for both senders
    small = eps["a"].send("b", Tokens("r3", 0, [1], "a"))
    big = eps["a"].send("b", KVData("r4", 0, 1, 1, 0, bytes(2 * size)))
    assert small.wait(10) is TransferState.DONE and big.state is not TransferState.DONE  # not stuck behind it
    big.wait(10)


def test_a_message_sent_during_a_big_transfer_takes_its_turn_on_the_line(net):
    """The line's backlog waits in the round-robin, not in kernel buffers it would queue behind."""
    shape = LinkShape(0.2, rtt_ms=10)  # 25 MB/s
    eps, _ = net(shape)
    inbox = Inbox()
    eps["b"].set_handler(inbox)
    big = eps["a"].send("b", KVData("big", 0, 1, 1, 0, bytes(40_000_000)))  # 1.6 s of line
    time.sleep(0.3)
    sent = time.monotonic()
    small = eps["a"].send("b", Tokens("small", 0, [1], "a"))
    assert small.wait(10) is TransferState.DONE
    (src, msg, arrived), = inbox.wait(1)
    assert msg.request_id == "small" and big.state is not TransferState.DONE
    assert arrived - sent < 0.3  # its one-way delay and a few frames' turn, not megabytes of older KV
    assert big.wait(10) is TransferState.DONE


def test_a_transfer_past_its_deadline_fails_and_stops_using_the_line(net):
    eps, _ = net(LinkShape(0.008, rtt_ms=10))  # 1 MB/s
    inbox = Inbox()
    eps["b"].set_handler(inbox)
    slow = eps["a"].send("b", KVData("r", 0, 1, 1, 0, bytes(2_000_000)), deadline_s=0.2)
    assert slow.wait(5) is TransferState.FAILED and "deadline" in slow.error
    after = eps["a"].send("b", Tokens("r2", 0, [1], "a"))
    assert after.wait(2) is TransferState.DONE  # the line is free again: the rest was not sent
    assert [m.type_name for _, m, _ in inbox.items] == ["Tokens"]


def test_in_process_peers_in_one_datacenter_get_the_message_without_sockets(net):
    eps, _ = net(LinkShape(0.001, rtt_ms=100), fast_path=True)
    near, far = Inbox(), Inbox()
    eps["c"].set_handler(near)
    eps["b"].set_handler(far)
    payload = bytes(3_000_000)
    msg = KVData("r", 0, 10, 1, 0, payload)
    t = eps["a"].send("c", msg)
    assert t.wait(2) is TransferState.DONE and t.elapsed_s < 0.5  # 3 MB "over RDMA", no copy
    (src, got, _), = near.wait(1)
    assert src == "a" and got is msg and t.bytes_total > len(payload)
    slow = eps["a"].send("b", Tokens("r", 0, [1], "a"))  # another datacenter: still the shaped line
    far.wait(1)
    assert slow.wait(5) is TransferState.DONE and slow.elapsed_s >= 0.1
