"""The P queue's wait under arrivals that are not Poisson (issue 48): the G/G/1 law of
placer.queueing.WaitModel(arrival_cv2=…) against the exact waits of a Lindley recursion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from placer.queueing import WaitModel, gg1_wait_factor, split_cv2
from placer.workload.arrivals import interarrival_cv2

#: A P queue's service mix (probability, seconds): mostly short prefills, a few long prompts.
MIX = ((0.9, 0.1), (0.1, 1.0))


def _gaps(rng: np.random.Generator, n: int, mean: float, cv2: float) -> np.ndarray:
    """Renewal inter-arrival times of mean ``mean`` and cv² ``cv2``: gamma below 1, balanced
    two-phase hyperexponential above."""
    if cv2 < 1.0:
        return rng.gamma(1.0 / cv2, mean * cv2, n)
    p = 0.5 * (1.0 + math.sqrt((cv2 - 1.0) / (cv2 + 1.0)))
    fast = rng.random(n) < p
    return np.where(fast, rng.exponential(mean / (2 * p), n), rng.exponential(mean / (2 * (1 - p)), n))


def _lindley(rho: float, cv2: float, n: int = 150_000, seed: int = 5) -> np.ndarray:
    """Exact waits W_{k+1} = max(0, W_k + S_k − A_{k+1}) of a GI/G/1 queue with ``MIX`` services."""
    rng = np.random.default_rng(seed)
    probs, sizes = np.array([p for p, _ in MIX]), np.array([s for _, s in MIX])
    mean_s = float((probs * sizes).sum())
    step = rng.choice(sizes, n, p=probs) - _gaps(rng, n, mean_s / rho, cv2)
    waits, w = np.empty(n), 0.0
    for k, u in enumerate(step.tolist()):
        waits[k] = w
        w = max(0.0, w + u)
    return waits[n // 10:]


def _law(rho: float, cv2: float) -> WaitModel:
    mean = sum(p * s for p, s in MIX)
    return WaitModel(rho, mean, sum(p * s * s for p, s in MIX), service=MIX, arrival_cv2=cv2)


@pytest.mark.parametrize("rho", [0.5, 0.8])
@pytest.mark.parametrize("cv2", [0.5, 2.0])
def test_the_wait_follows_the_arrivals_variability_as_a_lindley_recursion_does(rho, cv2):
    """Turns that follow their predecessor's answer arrive more regularly than Poisson (cv² 0.5), bursts
    less so (2): the mean wait and its 90th/95th percentiles move with them — the M/G/1 law (cv² 1) is off
    by 25–33 % here, the G/G/1 law within 10 %."""
    waits = _lindley(rho, cv2)
    law, poisson = _law(rho, cv2), _law(rho, 1.0)
    assert law.mean_wait_s == pytest.approx(waits.mean(), rel=0.10)
    assert abs(poisson.mean_wait_s / waits.mean() - 1.0) > 0.15
    for q in (0.90, 0.95):
        assert law.quantile_s(q) == pytest.approx(np.quantile(waits, q), rel=0.10)
        assert law.prob_exceeds(law.quantile_s(q)) == pytest.approx(1.0 - q, abs=1e-3)


def test_poisson_arrivals_keep_the_m_g_1_law():
    assert gg1_wait_factor(0.6, 1.0, 2.0) == 1.0
    assert _law(0.6, 1.0).quantile_s(0.9) == WaitModel(0.6, 0.19, 0.109, service=MIX).quantile_s(0.9)


def test_a_random_share_of_a_stream_is_nearly_poisson():
    assert split_cv2(0.4, 1.0) == pytest.approx(0.4)
    assert split_cv2(0.4, 0.1) == pytest.approx(0.94)


def test_interarrival_cv2_of_measured_times():
    assert interarrival_cv2([0.0, 1.0, 2.0, 3.0, 4.0]) == pytest.approx(0.0)
    rng = np.random.default_rng(1)
    assert interarrival_cv2(np.cumsum(rng.exponential(1.0, 20_000)).tolist()) == pytest.approx(1.0, rel=0.05)
