"""The M/G/1 wait's whole law (placer.mg1_wait) against a Lindley recursion, and the P queue law
carrying it: a queue whose work is mostly a few long services waits out one such service's
residual, not an exponential of the mean wait (issue 42, rnd-7-28)."""

import math
import random
from types import SimpleNamespace

import pytest

from placer.mg1_wait import cramer_rate, wait_shape
from placer.p_queues import packed_wait_law
from placer.queueing import WaitModel
from placer.ttft_tail import TtftTail

# 97 % short prompts, 3 % long ones carrying most of the work (the rnd-7-28 shape)
POINTS = ((0.97, 0.05), (0.03, 2.5))


def _lindley(rho, points, n=200_000, seed=3):
    """Waiting times of n FCFS arrivals at an M/G/1 queue, sorted (W' = max(0, W + S − A))."""
    rnd = random.Random(seed)
    mean = sum(p * s for p, s in points)
    lam = rho / mean
    probs, sizes = [p for p, _ in points], [s for _, s in points]
    w, out = 0.0, []
    for s in rnd.choices(sizes, probs, k=n):
        out.append(w)
        w = max(0.0, w + s - rnd.expovariate(lam))
    out.sort()
    return out


def _moments(points):
    return sum(p * s for p, s in points), sum(p * s * s for p, s in points)


def test_wait_quantiles_follow_the_service_mix_not_an_exponential():
    rho = 0.3
    mean, second = _moments(POINTS)
    law = WaitModel(rho, mean, second, service=POINTS)
    sim = _lindley(rho, POINTS)
    p90 = sim[int(0.9 * len(sim))]
    assert law.quantile_s(0.9) == pytest.approx(p90, rel=0.05)
    # the exponential of the same mean wait misses it by more than 15 %
    assert abs(WaitModel(rho, mean, second).quantile_s(0.9) / p90 - 1.0) > 0.15
    # the same mean (Pollaczek–Khinchine) either way
    shape = wait_shape(rho, POINTS)
    grid_mean = sum(m * j * shape.step_s for j, m in enumerate(shape.pmf))
    assert grid_mean == pytest.approx(law.mean_wait_s, rel=0.01)


def test_tail_decays_at_the_cramer_rate():
    rho = 0.6
    kappa = cramer_rate(rho, POINTS)
    mean = _moments(POINTS)[0]
    lam = rho / mean
    assert lam * (sum(p * math.exp(kappa * s) for p, s in POINTS) - 1.0) == pytest.approx(kappa, rel=1e-6)
    shape = wait_shape(rho, POINTS)
    a, b = shape.prob_exceeds(6.0), shape.prob_exceeds(8.0)
    assert math.log(a / b) / 2.0 == pytest.approx(kappa, rel=0.05)


def test_wait_plus_exponential_is_the_convolution():
    rho, theta = 0.3, 0.4
    mean, second = _moments(POINTS)
    tail = TtftTail(WaitModel(rho, mean, second, service=POINTS), wan_excess_mean_s=theta)
    rnd = random.Random(5)
    sim = sorted(w + rnd.expovariate(1.0 / theta) for w in _lindley(rho, POINTS, n=100_000))
    for t in (0.5, 1.5, 2.5):
        measured = sum(1 for x in sim if x > t) / len(sim)
        assert tail.prob_exceeds(t) == pytest.approx(measured, abs=0.01)


def test_packed_queue_law_carries_its_service_points():
    im = SimpleNamespace(prefill_chunk_tokens=8192, weight_bytes=1.0, forward_s=lambda *a: 0.01)
    items = [(9.7, 0.05, 20_000.0), (0.3, 2.5, 66_000.0)]  # no short prompt: no packing
    law = packed_wait_law(items, 4.0, im)
    sim = _lindley(law.rho, POINTS)
    assert law.rho == pytest.approx((9.7 * 0.05 + 0.3 * 2.5) / 4, rel=1e-6)
    assert law.quantile_s(0.9) == pytest.approx(sim[int(0.9 * len(sim))], rel=0.05)


def test_a_spread_class_waits_as_its_lognormal_lengths_do():
    """A class whose prompts spread (cv² 1, as the simulator draws them: lognormal) at ρ 0.6: the P90
    wait by the law of its lognormal points is the Lindley recursion's within 10 %; two points with
    the same mean and variance (the old class_items) put it 30 % short."""
    from bench.agreement_cases import small_pdd_dict
    from placer.flows import instance
    from placer.problem import resolve
    from placer.queue_laws import class_items
    from placer.queueing import spread_points
    from placer.specs import parse_scenario

    im = instance(resolve(parse_scenario(small_pdd_dict())), "H100-SXM", 2)
    cv2, n_mean, rho = 1.0, 16384, 0.6
    c = SimpleNamespace(input_tokens=n_mean, hit_rate=0.0, new_tokens_cv2=cv2)
    rps = rho / sum(it[0] * it[1] for it in class_items(1.0, c, im))
    law = packed_wait_law(class_items(rps, c, im), 1.0, im)
    two = packed_wait_law([(rps * p, im.prefill_s(n_mean * f, 0.0), n_mean * f) for p, f in spread_points(cv2)],
                          1.0, im)
    rnd, sigma = random.Random(1), math.sqrt(math.log1p(cv2))
    w, waits = 0.0, []
    for _ in range(150_000):
        waits.append(w)
        n = n_mean * math.exp(sigma * rnd.gauss(0.0, 1.0) - sigma * sigma / 2)
        w = max(0.0, w + im.prefill_s(n, 0.0) - rnd.expovariate(rps))
    waits.sort()
    p90 = waits[int(0.9 * len(waits))]
    assert law.quantile_s(0.9) == pytest.approx(p90, rel=0.10)
    assert two.quantile_s(0.9) < 0.8 * p90
