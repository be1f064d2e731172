"""The decoders' KV-wait law prices the line an arrival joins (issue 42: rnd-7-33's re-solved plan, its decoders
at 94 % of their KV, planned 13.5 % of arrivals waiting for KV where the simulator made 27 % wait, nearly all
behind a line, and its TTFT P90 0.51 s where the simulator read 0.88 s). The law (:func:`placer.kv_wait.kv_wait_law`)
against the simulator's decoder (:class:`placer.sim.decode.DecodeInstance`, admitting by the executor's
``admit_order``) fed Poisson arrivals, at fills where a line forms."""

from __future__ import annotations

import heapq
import random
from types import SimpleNamespace

import pytest

from placer.kv_admission import footprint_tokens, kv_wait_probability
from placer.kv_wait import kv_wait_law
from placer.sim.decode import DecodeInstance
from placer.sim.metrics import TimeSeries
from tests.placer.sim.test_engine import _Loop, _req

CAPACITY = 256_000  # KV tokens of the decoder
FIXED_S = 0.02  # the step's fixed part


def _run(mix, fill: float, per_seq_s: float, requests: int, seed: int = 1):
    """(the requests, each with its arrival and first token, the load the law takes, φ) at one simulated decoder
    whose planned KV is ``fill`` of its capacity: ``mix`` (arrival share, prompt, output) per class, a step of
    FIXED_S + ``per_seq_s`` × batch."""
    feet = [footprint_tokens(i, o) for _, i, o in mix]
    per = CAPACITY * fill / sum(s * o * f for (s, _, o), f in zip(mix, feet))  # λ × step
    step = FIXED_S + per_seq_s * per * sum(s * o for s, _, o in mix)  # at the planned batch
    rate = per / step
    load = [(rate * s, rate * s * o * step, f) for (s, _, o), f in zip(mix, feet)]
    im = SimpleNamespace(batch_cap=1 << 30, kv_capacity_tokens=CAPACITY, step_s=lambda b, ctx: FIXED_S + per_seq_s * b)
    loop = _Loop()
    dec = DecodeInstance(loop, im, "MD", None, TimeSeries(10, 10))
    rng, t, arrived = random.Random(seed), 0.0, []
    for rid in range(requests):
        t += rng.expovariate(rate)
        _, n_in, n_out = rng.choices(mix, weights=[s for s, _, _ in mix])[0]
        req = _req(rid, n_in=n_in, n_out=n_out)
        req.t_arr = t
        arrived.append(req)
        heapq.heappush(loop.heap, (t, -rid - 1, lambda tt, r: dec.join(r, tt, r.n_out), req))
    loop.run()
    return arrived, load, FIXED_S / step


def _waited(requests) -> tuple[float, float]:
    """(share of ``requests`` that waited for KV, mean seconds those waited)."""
    waits = [r.t_first - r.t_arr for r in requests]
    waited = [w for w in waits if w > 1e-9]
    return len(waited) / len(waits), sum(waited) / len(waited) if waited else 0.0


def _simulated(mix, fill: float, per_seq_s: float, requests: int, seed: int = 1):
    """(share of arrivals that waited for KV, mean seconds those waited, the load the law takes, φ): :func:`_run`
    past a warm-up fifth."""
    arrived, load, phi = _run(mix, fill, per_seq_s, requests, seed)
    return (*_waited(arrived[requests // 5:]), load, phi)


ONE_CLASS = [(1.0, 2048, 512)]
LONG_AND_SHORT = [(0.7, 1024, 256), (0.3, 8192, 1024)]


@pytest.mark.parametrize("mix,fill,per_seq_s", [
    (ONE_CLASS, 0.95, 0.0),  # a flat step: the line is Erlang's (the old law: 0.34 waiting, 0.67 s; simulated 0.48, 1.0 s)
    (ONE_CLASS, 0.90, 0.0004),  # a step that grows with the batch (φ ≈ 0.35): the line drains slower
    (LONG_AND_SHORT, 0.95, 0.0),  # footprints 1.3K and 9.2K, EASY backfilling
    (LONG_AND_SHORT, 0.90, 0.0004),
], ids=["one-class-flat-95", "one-class-growing-90", "long-short-flat-95", "long-short-growing-90"])
def test_the_kv_wait_law_prices_the_line_an_arrival_joins(mix, fill, per_seq_s):
    share, wait_s, load, phi = _simulated(mix, fill, per_seq_s, requests=100_000)
    assert share > 0.3  # a line forms: most waits are behind one
    planned_share, planned_wait_s = kv_wait_law(CAPACITY, load, phi)
    assert planned_share == pytest.approx(share, abs=0.08)
    assert planned_wait_s == pytest.approx(wait_s, rel=0.35)
    # finding no room for one's own footprint (no line) is a fraction of it
    assert kv_wait_probability(CAPACITY, load, phi) < share - 0.1



#: rnd-7-33's Gaudi3 decoders, scaled down: one class of long stays holds most of the KV (there 474 requests of
#: 157 s, 94 % of the KV) beside short ones (3-13 s there), so the occupancy wanders on the long stays' time scale.
LONG_BESIDE_SHORT = [(0.17, 2000, 500), (0.83, 1024, 16)]


def test_the_kv_wait_law_holds_for_long_stays_and_a_window_of_three_stays_reads_one_level():
    """Over many long stays the simulator's decoder makes as many arrivals wait as the law says (rnd-7-33's own
    Gaudi3 decoder fed its plan's classes for 150 stays of 157 s: 17.2 % waited, 4.16 s; the law 17.5 %, 4.01 s),
    while a window of three stays — the agreement bench's — reads anything from none to nearly all waiting
    (rnd-7-33's P90 −33 % off the plan: its decoders' 470-s window held 90-92 % of their KV where the plan and
    the long run hold 94 %)."""
    arrived, load, phi = _run(LONG_BESIDE_SHORT, 0.92, 0.0002, requests=120_000)
    stay = max(held / rate for rate, held, _ in load)  # ≈ 20 s, the short class's 0.6 s
    warm = [r for r in arrived if r.t_arr > 2 * stay]
    share, wait_s = _waited(warm)
    planned_share, planned_wait_s = kv_wait_law(CAPACITY, load, phi)
    assert planned_share == pytest.approx(share, abs=0.08)
    assert planned_wait_s == pytest.approx(wait_s, rel=0.35)
    start, end, windows = 2 * stay, arrived[-1].t_arr, []
    while start + 3 * stay <= end:
        windows.append(_waited([r for r in warm if start <= r.t_arr < start + 3 * stay])[0])
        start += 3 * stay
    assert min(windows) < share / 2 and max(windows) > 2 * share
