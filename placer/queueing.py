"""Queueing laws the planner, the evaluation and the checks share: a WAN transfer on a shared
line, and the M/G/1 waiting time of a P queue.

in:  bytes, a line's rate, RTT and utilisation; a queue's utilisation and service moments
out: :func:`wan_transfer_s` (mean seconds of one transfer under processor sharing),
     :class:`WaitModel` (mean wait, P(W > t) — the whole M/G/1 law where the service points are
     given, :mod:`placer.mg1_wait` — quantiles) and :func:`spread_points` (a class
     whose lengths vary, as two lengths with its mean and variance: what E[S²] needs). The tails built on these live in
     :mod:`placer.ttft_tail`, the P-queue layouts in :mod:`placer.flows`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placer.mg1_wait import WaitShape, wait_shape


def wan_transfer_s(n_bytes: float, link_bytes_per_s: float, rtt_s: float, utilization: float) -> float:
    """Seconds for one KV transfer over a shared WAN line.

    Transfers share the line like processor sharing (concurrent TCP flows): at
    utilisation ρ a transfer of b bytes takes b / (C (1 − ρ)) on average, plus one
    round trip for the request/ack of the transfer protocol.
    """
    if n_bytes <= 0:
        return 0.0
    if link_bytes_per_s <= 0:
        return math.inf
    return n_bytes / (link_bytes_per_s * max(1e-3, 1.0 - utilization)) + rtt_s


#: The lower of :func:`spread_points`' two points, as a share of the mean.
SPREAD_LOW = 0.5


def spread_points(cv2: float) -> list[tuple[float, float]]:
    """(probability, factor on the mean) of a two-point law with mean 1 and variance ``cv2``.

    A class whose requests' lengths spread (``Class.new_tokens_cv2``) is, for a queue's M/G/1
    wait, any law with the same first two moments (the mean wait depends on E[S] and E[S²]
    only): here most requests at :data:`SPREAD_LOW` of the mean and a few long ones at
    1 + cv2 / (1 − SPREAD_LOW) of it — the right-skewed shape of prompt lengths. ``cv2`` 0:
    one point, the mean.
    """
    if cv2 <= 0:
        return [(1.0, 1.0)]
    high = 1.0 + cv2 / (1.0 - SPREAD_LOW)
    p_high = (1.0 - SPREAD_LOW) / (high - SPREAD_LOW)
    return [(1.0 - p_high, SPREAD_LOW), (p_high, high)]


#: Points of :func:`lognormal_points` (Gauss–Hermite nodes).
LOGNORMAL_NODES = 6


def lognormal_points(cv2: float, nodes: int = LOGNORMAL_NODES) -> list[tuple[float, float]]:
    """(probability, factor on the mean) of a lognormal law of mean 1 and variance ``cv2`` on
    ``nodes`` points (Gauss–Hermite on the log, scaled so the mean is exactly 1): the shape prompt
    lengths have (as :func:`placer.queue_laws.tail_notes` takes them), where :func:`spread_points`
    keeps only the first two moments — enough for a queue's mean wait, not for its percentiles
    (:mod:`placer.mg1_wait` prices the whole law). ``cv2`` 0: one point, the mean."""
    if cv2 <= 0:
        return [(1.0, 1.0)]
    import numpy as np

    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    prob = w / w.sum()
    sigma = math.sqrt(math.log1p(cv2))
    factor = np.exp(sigma * x - sigma * sigma / 2)
    factor /= float((prob * factor).sum())
    return [(float(p), float(f)) for p, f in zip(prob, factor)]


@dataclass(frozen=True)
class WaitModel:
    """M/G/1 waiting time at utilisation ``rho`` with service moments ``mean_s``, ``second_moment_s2``."""

    rho: float
    mean_s: float
    second_moment_s2: float
    ride: float = 0.0
    """Probability that a request rides along in a forward already queued (packed prefills,
    :func:`placer.p_queues.packed_wait_law`); 0 where prompts are not packed."""
    mate_cost_s: float = 0.0
    """Mean seconds one more short prompt adds to a packed forward (its prefill alone less the
    weight read it shares); 0 where prompts are not packed."""
    service: tuple[tuple[float, float], ...] = ()
    """The service times as points ((probability, seconds), ...) with these moments: where given,
    P(W > t) is the M/G/1 wait's whole law (:func:`placer.mg1_wait.wait_shape`), not the
    exponential of its mean; () keeps the exponential."""

    def shape(self) -> WaitShape | None:
        """The wait's whole law where the service points are known and 0 < ρ < 1; else None
        (kept on the instance: the law is asked for at many t)."""
        if not self.service or self.rho <= 0 or self.rho >= 1:
            return None
        shape = self.__dict__.get("_shape")
        if shape is None:
            shape = wait_shape(self.rho, self.service)
            object.__setattr__(self, "_shape", shape)
        return shape

    @property
    def mean_wait_s(self) -> float:
        if self.rho <= 0:
            return 0.0
        if self.rho >= 1:
            return math.inf
        lam = self.rho / self.mean_s
        return lam * self.second_moment_s2 / (2 * (1 - self.rho))

    def prob_exceeds(self, t: float) -> float:
        """P(W > t): the M/G/1 law of the service points (:attr:`service`), else
        ≈ ρ exp(−tρ/E[W]) for t ≥ 0; 1 for t < 0."""
        if t < 0:
            return 1.0
        shape = self.shape()
        if shape is not None:
            return shape.prob_exceeds(t)
        if self.rho <= 0:
            return 0.0
        if self.rho >= 1:
            return 1.0
        return self.rho * math.exp(-t * self.rho / self.mean_wait_s)

    def quantile_s(self, q: float) -> float:
        if self.rho <= 0 or 1 - q >= self.rho:
            return 0.0
        if self.rho >= 1:
            return math.inf
        shape = self.shape()
        if shape is not None:
            return shape.quantile_s(q)
        return self.mean_wait_s / self.rho * math.log(self.rho / (1 - q))
