"""Queueing laws the planner, the evaluation and the checks share: a WAN transfer on a shared
line, and the M/G/1 waiting time of a P queue.

in:  bytes, a line's rate, RTT and utilisation; a queue's utilisation and service moments
out: :func:`wan_transfer_s` (mean seconds of one transfer under processor sharing),
     :class:`WaitModel` (mean wait, P(W > t) — the whole M/G/1 law where the service points are
     given, :mod:`placer.mg1_wait` — quantiles) and :func:`spread_points` (a class
     whose lengths vary, as two lengths with its mean and variance: what E[S²] needs),
     :func:`lognormal_points` / :func:`lognormal_bands` (a spread class's lengths for its
     moments / for its percentiles), :func:`spread_prompt` (a prompt whose new tokens are a factor on its
     class's: the cached prefix kept), :func:`gg1_wait_factor` and :func:`split_cv2` (arrivals that are not
     Poisson: the G/G/1 wait, ``WaitModel.arrival_cv2``). The tails built on these live in
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


def spread_prompt(input_tokens: float, hit_rate: float, factor: float) -> tuple[float, float]:
    """(input tokens, hit rate) of a prompt whose *new* tokens are ``factor`` times its class's, the cached
    prefix the class's own: a class's spread (``new_tokens_cv2``) is of its uncached tokens, so a long
    prompt of a high-hit class has more new tokens behind the same prefix, not a ``factor``-times longer
    context (scaling the whole prompt at a fixed hit puts a class of 70K-token prompts at 97.7 % hit and
    new-token cv² 4.6 at 2.3M-token contexts in its tail: on rnd-7-24's trace E[S²] 3.6 s² on B200 tp1
    where the trace holds 2.0; this rule 2.07). The one rule the P-queue laws and the class workload
    (:func:`placer.workload.synthetic.class_requests`) share."""
    cached = input_tokens * hit_rate
    n_in = cached + (input_tokens - cached) * factor
    return n_in, (cached / n_in if n_in > 0 else 0.0)


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


def split_cv2(cv2: float, share: float) -> float:
    """Inter-arrival cv² of a random ``share`` (0 < share ≤ 1) of a renewal stream of cv² ``cv2``:
    share·cv2 + 1 − share (Whitt's QNA splitting rule; exact for the first two moments of a
    Bernoulli-thinned renewal process): a thin random share of any stream is nearly Poisson."""
    share = min(max(share, 0.0), 1.0)
    return share * cv2 + 1.0 - share


def gg1_wait_factor(rho: float, arrival_cv2: float, service_cv2: float) -> float:
    """E[W] of a G/G/1 queue over E[W] of the M/G/1 queue with the same service (Pollaczek–Khinchine):
    (c_a² + c_s²)/(1 + c_s²) (Kingman's two-moment law, exact for M/G/1) times the correction of
    Kraemer & Langenbach-Belz (1976), exp(−2(1 − ρ)(1 − c_a²)²/(3ρ(c_a² + c_s²))) for c_a² < 1 and
    exp(−(1 − ρ)(c_a² − 1)/(c_a² + 4c_s²)) for c_a² > 1 (Whitt, *The queueing network analyzer*,
    Bell System Technical Journal 62, 1983, eq. 45). 1 for Poisson arrivals (c_a² = 1)."""
    if arrival_cv2 == 1.0 or rho <= 0.0:
        return 1.0
    ca2, cs2 = max(arrival_cv2, 0.0), max(service_cv2, 0.0)
    base = (ca2 + cs2) / (1.0 + cs2)
    rho = min(rho, 1.0)
    if ca2 < 1.0:
        return base * math.exp(-2.0 * (1.0 - rho) * (1.0 - ca2) ** 2 / (3.0 * rho * (ca2 + cs2)))
    return base * math.exp(-(1.0 - rho) * (ca2 - 1.0) / (ca2 + 4.0 * cs2))


def lognormal_bands(cv2: float, edges: tuple[float, ...]) -> list[tuple[float, float, float, float]]:
    """A lognormal law of mean 1 and variance ``cv2`` cut at the cumulative probabilities ``edges``
    (0 … 1): per band (probability, its lowest factor, its mean factor, the factor's variance within it),
    in closed form (for f = e^{σZ − σ²/2}, E[f; a < Z < b] = Φ(b − σ) − Φ(a − σ) and
    E[f²; a < Z < b] = e^{σ²}(Φ(b − 2σ) − Φ(a − 2σ))). The lowest band starts at the law's
    0.1st percentile, not at 0. A class's own share of a TTFT percentile, where :func:`lognormal_points`
    (Gauss–Hermite) holds the moments but puts half its mass at each side of the median."""
    from statistics import NormalDist

    sigma = math.sqrt(math.log1p(cv2))
    norm = NormalDist()

    def below(z: float, shift: float = 0.0) -> float:  # Φ(z − shift), z = ±inf allowed
        return 1.0 if z == math.inf else norm.cdf(z - shift)

    out = []
    for lo, hi in zip(edges, edges[1:]):
        a = norm.inv_cdf(max(lo, 1e-3))
        b = norm.inv_cdf(hi) if hi < 1.0 else math.inf
        mass = max(below(b) - below(a), 1e-300)
        first = (below(b, sigma) - below(a, sigma)) / mass
        second = math.exp(sigma * sigma) * (below(b, 2 * sigma) - below(a, 2 * sigma)) / mass
        out.append((hi - lo, math.exp(sigma * a - sigma * sigma / 2), first, max(second - first * first, 0.0)))
    return out


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
    arrival_cv2: float = 1.0
    """Squared coefficient of variation of the queue's inter-arrival times (1: Poisson, the M/G/1
    law). Otherwise a G/G/1 queue: its wait is the M/G/1 wait of the same service scaled in time by
    :func:`gg1_wait_factor` (the probability of waiting stays ρ; on a Lindley recursion with
    renewal arrivals of c_a² 0.5 and 2, tests/placer/test_gg1_wait.py, the mean and the 90th/95th
    percentiles within ~10 % at ρ ≥ 0.5; at light load the law is conservative for c_a² < 1)."""

    @property
    def time_scale(self) -> float:
        """The G/G/1 wait over the M/G/1 wait of the same service (:func:`gg1_wait_factor`)."""
        if self.arrival_cv2 == 1.0 or self.mean_s <= 0:
            return 1.0
        return gg1_wait_factor(self.rho, self.arrival_cv2, self.second_moment_s2 / (self.mean_s * self.mean_s) - 1.0)

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
        return self.time_scale * lam * self.second_moment_s2 / (2 * (1 - self.rho))

    def prob_exceeds_plus_exp(self, t: float, theta_s: float) -> float | None:
        """P(W + X > t), X ~ Exp(``theta_s``) independent, on the whole law (None where it is not known:
        :meth:`shape`). With the G/G/1 scale k: P(kW' + X > t) = P(W' + X/k > t/k), W' the M/G/1 wait."""
        shape = self.shape()
        if shape is None:
            return None
        k = self.time_scale
        return shape.prob_exceeds_plus_exp(t / k, theta_s / k)

    def prob_exceeds(self, t: float) -> float:
        """P(W > t): the M/G/1 law of the service points (:attr:`service`), else
        ≈ ρ exp(−tρ/E[W]) for t ≥ 0; 1 for t < 0."""
        if t < 0:
            return 1.0
        shape = self.shape()
        if shape is not None:
            return shape.prob_exceeds(t / self.time_scale)
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
            return self.time_scale * shape.quantile_s(q)
        return self.mean_wait_s / self.rho * math.log(self.rho / (1 - q))
