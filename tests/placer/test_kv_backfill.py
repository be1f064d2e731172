"""Decode KV admission passes a blocked head only where the head loses nothing (issue 42: head-of-line
blocking). :func:`placer.kv_admission.admit_order` is FIFO with EASY backfilling: a request that fits
may pass a head that does not when it leaves by the head's *shadow* (the step its room comes) or fits
beside the head then; the head is never admitted later than strict FIFO admits it. One rule, timed
twice: the simulator's decoders (:mod:`placer.sim.decode`) and the executor's (``KvGate``)."""

from __future__ import annotations

import heapq
from types import SimpleNamespace

import pytest

from placer.kv_admission import KvGate, admit_order, footprint_tokens
from placer.sim.decode import DecodeInstance
from placer.sim.metrics import TimeSeries
from tests.placer.sim.test_engine import _Loop, _req


def test_a_small_request_that_leaves_before_the_giants_room_comes_passes_it():
    # 1000 tokens; A holds 500 until step 40, B 200 until step 80; the giant G needs 640: its room
    # comes at step 40 (300 free + A's 500), with 160 to spare beside it
    gate = KvGate(1000)
    assert gate.offer("A", 500, steps=40, now=0) and gate.offer("B", 200, steps=80, now=0)
    assert not gate.offer("G", 640, steps=80, now=0)
    assert not gate.offer("s-late", 208, steps=100, now=0)  # fits now, but stays past 40 and not beside G
    assert gate.offer("s-spare", 160, steps=100, now=0)  # stays past 40, fits in the spare beside G
    assert gate.offer("s-short", 112, steps=12, now=0)  # gone by step 12 < 40: passes
    assert [k for k, *_ in gate.waiting] == ["G", "s-late"]
    admitted, _ = gate.release("s-short", now=12)
    assert admitted == []  # the room it frees is G's: nothing passes that G would wait for
    admitted, _ = gate.release("A", now=40)
    assert "G" in gate.reserved and len(admitted) == 1  # at the step strict FIFO admits it
    assert [k for k, *_ in gate.waiting] == ["s-late"]


def test_the_giant_is_not_starved_by_a_stream_of_small_requests():
    """Without a guard, each small request leaving frees room another small one takes, and the giant
    (which needs five of them gone) waits for ever; with the shadow it is admitted exactly when strict
    FIFO would admit it."""
    gate = KvGate(1000)
    for i in range(8):  # 8 × 112 = 896 held, one leaving every 5 steps
        assert gate.offer(f"h{i}", 112, steps=5 * (i + 1), now=0)
    assert not gate.offer("G", 640, steps=100, now=0)
    ends = {f"h{i}": 5 * (i + 1) for i in range(8)}
    admitted_at, passed = None, 0
    for step in range(1, 60):
        for k in [k for k, e in ends.items() if e == step]:
            del ends[k]
            got, _ = gate.release(k, now=step)
            if "G" in gate.reserved and admitted_at is None:
                admitted_at = step
        if step % 5 == 3:  # a small request arrives, staying 40 steps
            key = f"s{step}"
            if gate.offer(key, 112, steps=40, now=step):
                passed += admitted_at is None
                ends[key] = step + 40
    # FIFO: 104 free + five leaving (560) ≥ 640 at step 25
    assert admitted_at == 25
    assert passed == 0  # the arrivals here would outstay the giant's shadow: none passes it


def test_admit_order_keeps_fifo_when_a_stay_is_unknown():
    # a held request of unknown stay: the head's room has no known step, so nothing passes
    order = admit_order(1000, 640, 1, float("inf"), [(float("inf"), 640)], [(640, 10), (16, 1)], now=0)
    assert order == []


def _decoder(capacity_tokens: int, step_s: float = 0.01):
    im = SimpleNamespace(batch_cap=1024, kv_capacity_tokens=capacity_tokens, step_s=lambda b, ctx: step_s)
    loop = _Loop()
    return loop, DecodeInstance(loop, im, "MD", None, TimeSeries(10, 10))


def test_the_simulator_lets_small_requests_pass_a_giant_and_admits_the_giant_when_fifo_would():
    loop, dec = _decoder(1000)
    a = _req(1, n_in=600, n_out=40)  # 640 tokens, 40 steps
    giant = _req(2, n_in=560, n_out=80)  # 640 tokens: waits for A
    small = _req(3, n_in=100, n_out=12)  # 112 tokens, 12 steps: gone long before A
    assert footprint_tokens(a.n_in, a.n_out) == 640 and footprint_tokens(small.n_in, small.n_out) == 112
    dec.join(a, 0.0, a.n_out)
    dec.join(giant, 0.0, giant.n_out)
    dec.join(small, 0.0, small.n_out)
    assert small.t_first == 0.0  # strict FIFO: it waited 0.4 s behind the giant
    loop.run()
    assert giant.t_first == pytest.approx(loop.decoded[1])  # admitted as A leaves: what FIFO gives it
    assert loop.decoded[3] == pytest.approx(12 * 0.01)


def test_the_simulator_and_the_executors_gate_admit_in_the_same_order():
    """The same arrivals through both books: the same requests admitted at the same steps."""
    arrivals = [(0, 1, 600, 40), (0, 2, 560, 80), (0, 3, 100, 12), (0, 4, 100, 100), (3, 5, 16, 4),
                (3, 6, 300, 30), (5, 7, 48, 50), (13, 8, 200, 20), (20, 9, 40, 10)]
    loop, dec = _decoder(1000, step_s=1.0)  # one step a second: time is the step counter
    reqs = {}
    for t, rid, n_in, n_out in arrivals:  # arrivals before the finishes of the same instant
        reqs[rid] = _req(rid, n_in=n_in, n_out=n_out)
        heapq.heappush(loop.heap, (float(t), rid - 1000, lambda tt, arg: dec.join(arg, tt, arg.n_out), reqs[rid]))
    loop.run()
    simulated = {rid: r.t_first for rid, r in reqs.items()}
    gate, ends, admitted_at = KvGate(1000), {}, {}
    for step in range(400):
        for _, rid, n_in, n_out in [a for a in arrivals if a[0] == step]:
            if gate.offer(rid, footprint_tokens(n_in, n_out), steps=n_out, now=step):
                admitted_at[rid], ends[rid] = step, step + n_out
        for k in sorted(k for k, e in ends.items() if e == step):
            del ends[k]
            gate.release(k, now=step)
            for rid in gate.reserved.keys() - admitted_at.keys():
                admitted_at[rid], ends[rid] = step, step + reqs[rid].n_out
    assert admitted_at == pytest.approx(simulated)
    assert simulated[3] == 0.0 and simulated[2] == 40.0  # the small one passed; the giant came at A's end
