"""The whole law of an M/G/1 queue's waiting time from its service-time mix (Pollaczek–Khinchine /
Beneš), not only its mean.

in:  a queue's utilisation ρ and its service times as points ((probability, seconds), ...)
out: :func:`wait_shape` (cached) → :class:`WaitShape`: P(W > t), P(W + X > t) for an independent
     exponential X, quantiles; :func:`cramer_rate` (the tail's exact decay rate)

Why: a queue whose work is mostly a few long services (a 3 % class of 66K-token prompts carrying
71 % of a P queue's work) makes a waiting request wait out the residual of one such service —
roughly uniform over 0 … its length — not an exponential of the mean wait. The mean wait (P–K)
is the same either way; the 90th and 95th percentiles are not.

The law (Beneš' formula): W = R₁ + … + R_N, N geometric (P(N = n) = (1 − ρ)ρⁿ), the Rᵢ independent
residual services of density (1 − B(x))/E[S]; for service points (pᵢ, sᵢ) a residual is uniform on
[0, sᵢ] with probability pᵢsᵢ/E[S]. Its distribution on a grid is the transform
(1 − ρ)/(1 − ρ·R̂) (numpy's FFT, the grid long enough that P(W > end) < 1e-7 by Lundberg's bound
P(W > t) ≤ e^{−κt}, κ :func:`cramer_rate`); past the grid the tail decays at κ.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

#: Grid points over the waiting time's range (the FFT runs on twice as many).
GRID = 2048
#: The grid ends where Lundberg's bound puts P(W > t) below this.
TAIL_CUT = 1e-7


def cramer_rate(rho: float, points: tuple[tuple[float, float], ...]) -> float:
    """κ > 0 with λ(E[e^{κS}] − 1) = κ, λ = ρ/E[S]: P(W > t) ≤ e^{−κt} and ~ C·e^{−κt} for large t."""
    mean = sum(p * s for p, s in points)
    lam = rho / mean
    top = max(s for p, s in points if p > 0)

    def excess(k: float) -> float:
        return lam * (sum(p * math.exp(min(k * s, 700.0)) for p, s in points) - 1.0) - k

    lo, hi = 0.0, 1.0 / top
    while excess(hi) < 0.0:
        lo, hi = hi, hi * 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if excess(mid) < 0.0:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class WaitShape:
    """P(W ≤ t) of an M/G/1 wait on a grid of step ``step_s``: ``pmf`` (the mass rounded to each
    grid point, the atom at 0 included), ``cdf`` at the points' upper half-steps, ``decay`` (κ)."""

    rho: float
    step_s: float
    pmf: np.ndarray
    cdf: list[float]
    decay: float
    _near: dict = field(default_factory=dict, compare=False, repr=False)
    """θ → E[e^{−(jh − W)/θ}; W ≤ jh] at each grid point (:meth:`prob_exceeds_plus_exp`)."""

    def prob_exceeds(self, t: float) -> float:
        """P(W > t) (1 for t < 0)."""
        if t < 0.0:
            return 1.0
        h = self.step_s
        pos = t / h - 0.5  # the cdf's nodes lie at (j + ½)h
        cdf = self.cdf
        n = len(cdf)
        if pos >= n - 1:
            tail = max(1.0 - cdf[-1], 0.0)
            return tail * math.exp(-self.decay * (t - (n - 0.5) * h))
        if pos < 0.0:  # between the atom at 0 (P(W ≤ 0) = 1 − ρ) and the first node
            below = (1.0 - self.rho) + (cdf[0] - (1.0 - self.rho)) * (t / (0.5 * h))
        else:
            j = int(pos)
            below = cdf[j] + (cdf[j + 1] - cdf[j]) * (pos - j)
        return min(max(1.0 - below, 0.0), 1.0)

    def prob_exceeds_plus_exp(self, t: float, theta_s: float) -> float:
        """P(W + X > t), X ~ Exp(``theta_s``) independent of W:
        P(W > t) + E[e^{−(t − W)/θ}; W ≤ t] — the second term on the grid once per θ (W's mass sits on
        the grid points, so between two of them it decays as e^{−(t − jh)/θ})."""
        if t < 0.0:
            return 1.0
        near = self._near.get(theta_s)
        if near is None:
            n, h = len(self.pmf), self.step_s
            kernel = np.exp(-np.arange(n) * h / theta_s)
            conv = np.fft.irfft(np.fft.rfft(self.pmf, 2 * n) * np.fft.rfft(kernel, 2 * n), 2 * n)[:n]
            near = self._near[theta_s] = np.maximum(conv, 0.0).tolist()
        h = self.step_s
        j = min(int(t / h), len(near) - 1)
        return min(self.prob_exceeds(t) + near[j] * math.exp(-(t - j * h) / theta_s), 1.0)

    def quantile_s(self, q: float) -> float:
        """The smallest t with P(W ≤ t) ≥ q."""
        if 1.0 - q >= self.rho:
            return 0.0
        lo, hi = 0.0, self.step_s
        while self.prob_exceeds(hi) > 1.0 - q:
            hi *= 2.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self.prob_exceeds(mid) > 1.0 - q:
                lo = mid
            else:
                hi = mid
        return hi


@functools.lru_cache(maxsize=4096)
def wait_shape(rho: float, points: tuple[tuple[float, float], ...]) -> WaitShape:
    """The M/G/1 wait's law at utilisation ``rho`` (0 < ρ < 1) for service ``points`` ((prob, s))."""
    points = tuple((p, s) for p, s in points if p > 0.0 and s > 0.0)
    total = sum(p for p, _ in points)
    points = tuple((p / total, s) for p, s in points)
    mean = sum(p * s for p, s in points)
    kappa = cramer_rate(rho, points)
    horizon = math.log(1.0 / TAIL_CUT) / kappa
    h = horizon / GRID
    # the residual service, rounded to the nearest grid point: mass of [(j − ½)h, (j + ½)h)
    edges = (np.arange(GRID) + 0.5) * h
    weights = np.array([p * s / mean for p, s in points])
    sizes = np.array([s for _, s in points])
    cdf_r = (weights[:, None] * np.minimum(edges[None, :] / sizes[:, None], 1.0)).sum(axis=0)
    r = np.diff(np.concatenate(([0.0], cdf_r)))
    spec = np.fft.rfft(np.concatenate((r, np.zeros(GRID))))
    pmf = np.fft.irfft((1.0 - rho) / (1.0 - rho * spec), 2 * GRID)[:GRID]
    pmf = np.maximum(pmf, 0.0)
    cdf = np.minimum(np.maximum.accumulate(np.cumsum(pmf)), 1.0)
    return WaitShape(rho, h, pmf, cdf.tolist(), kappa)
