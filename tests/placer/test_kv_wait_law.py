"""The KV a decoder holds when its step grows with the batch (issue 42: rnd-7-37's MD, planned with
0.4 % of arrivals waiting for KV room, where the simulator made 15 % wait, 0.3 s on average): the
requests held are negative binomial, not Poisson, and the wait for room enters the first token's law."""

from __future__ import annotations

import heapq
import random

import pytest

from placer.kv_admission import kv_occupancy_variance
from placer.kv_wait import kv_wait_law
from placer.queueing import WaitModel
from placer.ttft_tail import TtftTail


def _held_requests(rate: float, tokens: int, fixed_s: float, per_seq_s: float, horizon_s: float, seed: int = 1):
    """Time-average mean and variance of the requests a decoder holds: Poisson arrivals, each emits
    ``tokens`` tokens, one per step, and a step takes fixed_s + per_seq_s × (requests held) (the
    batch steps in lockstep: a step counter v, a request leaves at the v it joined at + tokens)."""
    rng = random.Random(seed)
    ends: list[float] = []
    t, v, nxt = 0.0, 0.0, rng.expovariate(rate)
    area = area2 = 0.0
    warm = horizon_s / 10
    while t < horizon_s:
        n = len(ends)
        step = fixed_s + per_seq_s * n
        finish = t + (ends[0] - v) * step if ends else float("inf")
        t_next = min(nxt, finish)
        if t_next > warm:
            dt = t_next - max(t, warm)
            area += n * dt
            area2 += n * n * dt
        if n:
            v += (t_next - t) / step
        t = t_next
        if t == nxt:
            heapq.heappush(ends, v + tokens)
            nxt = t + rng.expovariate(rate)
        else:
            heapq.heappop(ends)
    span = t - warm
    mean = area / span
    return mean, area2 / span - mean * mean


def test_a_step_that_grows_with_the_batch_makes_the_held_requests_overdispersed():
    fixed, per_seq, tokens, rate = 0.005, 0.005 / 15, 200, 10.5  # processor-sharing load 0.7
    mean, var = _held_requests(rate, tokens, fixed, per_seq, horizon_s=6000.0)
    step = fixed + per_seq * mean
    phi = fixed / step  # the share of the step the batch does not pay for
    assert 0.15 < phi < 0.4 and mean > 25
    law = kv_occupancy_variance([(rate, mean, 1.0)], phi)  # footprint 1: the KV is the count
    assert law == pytest.approx(var, rel=0.2)
    assert var > 2.5 * mean  # the M/G/infinity law (Poisson: variance = mean) is far off
    assert kv_occupancy_variance([(rate, mean, 1.0)]) == pytest.approx(mean)


def test_a_fuller_and_slower_decoder_makes_more_arrivals_wait_and_longer():
    # rnd-7-37's MD (H800 tp4): (req/s, requests held, footprint) per class, its KV, φ = 0.2
    load = [(4.182, 55.15, 18_432.0), (1.461, 13.58, 15_088.0), (0.154, 4.16, 10_960.0), (0.498, 18.37, 16_544.0),
            (0.468, 15.83, 5_520.0)]
    capacity = 2_109_052.0
    poisson_share, _ = kv_wait_law(capacity, load)
    share, wait_s = kv_wait_law(capacity, load, fixed_share=0.2)
    assert poisson_share < 0.01 and share > 0.08 and wait_s > 0.3


def test_the_kv_wait_lengthens_the_first_token_tail():
    tail = TtftTail(WaitModel(0.5, 0.2, 0.06))
    slower = tail.with_kv_wait(0.15, 1.2)
    assert slower.prob_exceeds(1.0) > tail.prob_exceeds(1.0) + 0.05
    assert tail.with_kv_wait(0.0, 1.2).prob_exceeds(1.0) == tail.prob_exceeds(1.0)


def test_the_line_for_kv_forgets_over_four_over_beta_squared_of_the_occupancy():
    """rnd-7-25-mixed's B200 tp8-dep decoder (11.44M tokens, four classes, φ 0.25): β 0.88 above its mean KV, so
    28 % of arrivals wait (Halfin and Whitt's 1 / (1 + βΦ(β)/φ(β))) and the line forgets over 4 / β² ≈ 5 of the
    occupancy's relaxation times (its stays ÷ φ, ~110 s): a simulation warmed less reads a shorter line."""
    from statistics import NormalDist

    from placer.kv_wait import kv_line_relaxation, kv_room_beta

    load = [(22.49, 278.3, 31616), (16.52, 456.2, 3792), (22.77, 9.6, 3040), (32.21, 90.9, 1728)]
    beta = kv_room_beta(11.44e6, load, 0.249)
    assert beta == pytest.approx(0.88, abs=0.02)
    n = NormalDist()
    assert kv_wait_law(11.44e6, load, 0.249)[0] == pytest.approx(1 / (1 + beta * n.cdf(beta) / n.pdf(beta)))
    assert kv_line_relaxation(beta) == pytest.approx(4 / beta ** 2)
    assert kv_line_relaxation(kv_room_beta(20e6, load, 0.249)) == 1.0  # KV that seldom binds: the occupancy's own
