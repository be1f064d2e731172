"""Arrival processes: Poisson, renewal (gamma gaps of a given cv²), and bursty (a two-state
Markov-modulated Poisson process); the variability of measured arrivals.

in:  a mean rate (req/s), a seeded ``random.Random`` (and a gap cv²); or measured arrival times
out: an endless iterator of arrival times (s), increasing; :func:`interarrival_cv2` (gaps) and
     :func:`count_dispersion` (counts per bin) — a trace's variability, for ``WorkloadSpec.arrival_cv2``
     — and :func:`bin_width_s` (whether measured times sit on a grid of bins).

Renewal: i.i.d. gaps of mean 1/rate and variance cv²/rate² — below 1 gamma (shape 1/cv²: more
regular than Poisson), above 1 the balanced two-phase hyperexponential (each gap exponential, of
one of two means, each phase holding half the mean: Whitt's QNA's two-moment stand-in, the law the
planner's G/G/1 wait was checked against, tests/placer/test_gg1_wait.py); cv² 1 is Poisson, drawn
as before (``expovariate``), so a seed's stream is unchanged. Two moments do not fix a queue's wait
at light load: gamma gaps of cv² 2 (clumps of near-simultaneous arrivals) wait ~40 % longer at
ρ 0.3 than hyperexponential ones of the same cv², ~0 % at ρ 0.85.

Bursty: the process alternates between a *burst* state (rate ``burst_factor`` × mean)
and a quiet state, spending ``burst_time_fraction`` of the time in bursts of mean
length ``burst_mean_s``; the quiet rate is set so the long-run mean is the given rate.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from placer.errors import InputError


@dataclass(frozen=True)
class Burstiness:
    burst_factor: float = 3.0  # rate in a burst / mean rate
    burst_time_fraction: float = 0.15  # share of time spent in bursts
    burst_mean_s: float = 5.0  # mean length of one burst

    def __post_init__(self) -> None:
        if self.burst_factor < 1:
            raise InputError(f"burst_factor must be >= 1, got {self.burst_factor}")
        if not 0 < self.burst_time_fraction < 1:
            raise InputError(f"burst_time_fraction must be in (0, 1), got {self.burst_time_fraction}")
        if self.burst_factor * self.burst_time_fraction >= 1:
            raise InputError("burst_factor × burst_time_fraction must be < 1 (the quiet rate would be negative), "
                             f"got {self.burst_factor} × {self.burst_time_fraction}")
        if self.burst_mean_s <= 0:
            raise InputError(f"burst_mean_s must be > 0, got {self.burst_mean_s}")


def poisson_arrivals(rate_rps: float, rng: random.Random, start_s: float = 0.0) -> Iterator[float]:
    if rate_rps <= 0:
        raise InputError(f"arrival rate must be > 0 req/s, got {rate_rps}")
    t = start_s
    expo = rng.expovariate
    while True:
        t += expo(rate_rps)
        yield t


def renewal_arrivals(rate_rps: float, rng: random.Random, cv2: float, start_s: float = 0.0) -> Iterator[float]:
    """Renewal arrivals of mean rate ``rate_rps`` whose gaps have squared coefficient of variation ``cv2``
    (below 1 gamma, shape 1/cv²; above 1 balanced hyperexponential); ``cv2`` 1: :func:`poisson_arrivals`,
    the same draws."""
    if not cv2 > 0 or math.isinf(cv2):
        raise InputError(f"arrival_cv2 must be > 0 and finite, got {cv2}")
    if cv2 == 1.0:
        return poisson_arrivals(rate_rps, rng, start_s)
    if rate_rps <= 0:
        raise InputError(f"arrival rate must be > 0 req/s, got {rate_rps}")
    if cv2 < 1.0:
        return _gamma_arrivals(1.0 / cv2, cv2 / rate_rps, rng, start_s)
    fast = 0.5 * (1.0 + math.sqrt((cv2 - 1.0) / (cv2 + 1.0)))
    return _hyperexponential_arrivals(fast, 2.0 * fast * rate_rps, 2.0 * (1.0 - fast) * rate_rps, rng, start_s)


def _gamma_arrivals(shape: float, scale: float, rng: random.Random, t: float) -> Iterator[float]:
    gamma = rng.gammavariate
    while True:
        t += gamma(shape, scale)
        yield t


def _hyperexponential_arrivals(fast: float, fast_rps: float, slow_rps: float, rng: random.Random,
                               t: float) -> Iterator[float]:
    """Gaps Exp(``fast_rps``) with probability ``fast``, else Exp(``slow_rps``)."""
    rand, expo = rng.random, rng.expovariate
    while True:
        t += expo(fast_rps) if rand() < fast else expo(slow_rps)
        yield t


def bursty_arrivals(rate_rps: float, rng: random.Random, shape: Burstiness = Burstiness(),
                    start_s: float = 0.0) -> Iterator[float]:
    """Markov-modulated Poisson arrivals with long-run mean ``rate_rps``."""
    if rate_rps <= 0:
        raise InputError(f"arrival rate must be > 0 req/s, got {rate_rps}")
    p, b = shape.burst_time_fraction, shape.burst_factor
    rates = (rate_rps * (1 - p * b) / (1 - p), rate_rps * b)  # quiet, burst
    stay = (shape.burst_mean_s * (1 - p) / p, shape.burst_mean_s)  # mean sojourn per state
    state = 1 if rng.random() < p else 0
    t = start_s
    switch = t + rng.expovariate(1.0 / stay[state])
    while True:
        gap = rng.expovariate(rates[state]) if rates[state] > 0 else float("inf")
        if t + gap < switch:
            t += gap
            yield t
            continue
        t = switch  # memoryless: restart the clock in the new state
        state = 1 - state
        switch = t + rng.expovariate(1.0 / stay[state])


def interarrival_cv2(times_s: Iterable[float]) -> float:
    """The squared coefficient of variation of the gaps between successive arrival times (variance / mean²
    of the gaps, the times sorted): 1 for Poisson arrivals, below 1 for more regular ones (turns of a
    conversation each sent a think time after their predecessor's answer), above 1 for bursts — what
    ``WorkloadSpec.arrival_cv2`` takes from a trace. Needs at least three distinct times."""
    ts = sorted(float(t) for t in times_s if t == t)  # NaN: a request that never came
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    if len(gaps) < 2 or sum(gaps) <= 0:
        raise InputError(f"arrival times: need at least three distinct times to measure their variability, "
                         f"got {len(ts)}")
    mean = sum(gaps) / len(gaps)
    var = sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)
    return var / (mean * mean)


def count_dispersion(times_s: Iterable[float], bin_s: float) -> float:
    """Variance / mean of the arrivals counted in each ``bin_s`` bin from the first time's bin up to the last's
    (empty bins counted, the last one not): the variability of a trace that records counts per bin, not times (its gaps are
    the grid's). For a renewal process it tends to the gaps' cv² as a bin holds many arrivals (1: Poisson,
    at any width; off by O(1/arrivals per bin) otherwise)."""
    if not bin_s > 0:
        raise InputError(f"bin width must be > 0 s, got {bin_s}")
    ts = [float(t) for t in times_s if t == t]
    if not ts:
        raise InputError("arrival times: none to count")
    first = min(ts)
    counts: dict[int, int] = {}
    for t in ts:
        k = int((t - first) / bin_s + 1e-9)
        counts[k] = counts.get(k, 0) + 1
    bins = max(counts)  # the last bin left out: the times may stop inside it
    counts.pop(bins)
    if bins < 3:
        raise InputError(f"arrival times: need at least three whole bins of {bin_s} s to measure their "
                         f"variability, got {bins}")
    mean = sum(counts.values()) / bins
    var = (sum((c - mean) ** 2 for c in counts.values()) + (bins - len(counts)) * mean * mean) / (bins - 1)
    return var / mean


#: Measured times are taken as binned when they have at least this many gaps between distinct times ...
BIN_MIN_GAPS = 20
#: ... every one within this share of a bin (and at least 1.5 ms: timestamps are whole ms) of a whole
#: number of bins ...
BIN_TOLERANCE = 0.002
#: ... and at least this many requests per distinct time on average (ties are the rule).
BIN_MIN_TIES = 2.0


def bin_width_s(stamps: list[float], requests: int) -> float:
    """The bin width (s) of ``requests`` arrivals whose distinct times, in order, are ``stamps``, when they
    are binned — at least :data:`BIN_MIN_GAPS` gaps, every one a whole number of the median gap (the bin)
    within :data:`BIN_TOLERANCE` of a bin, and :data:`BIN_MIN_TIES` requests or more per distinct time on
    average (the public Mooncake traces count arrivals in 3-second bins) — else 0: times recorded at the
    arrivals' own resolution have gaps of every size and few ties."""
    gaps = [b - a for a, b in zip(stamps, stamps[1:]) if b > a]
    if len(gaps) < BIN_MIN_GAPS or requests < BIN_MIN_TIES * len(stamps):
        return 0.0
    width = sorted(gaps)[len(gaps) // 2]
    tolerance = max(BIN_TOLERANCE * width, 0.0015)
    if width <= 2 * tolerance:
        return 0.0
    if any(abs(g - round(g / width) * width) > tolerance for g in gaps):
        return 0.0
    return width


def arrivals(kind: str, rate_rps: float, rng: random.Random, shape: Burstiness | None = None,
             cv2: float = 1.0) -> Iterator[float]:
    """Arrival times of ``kind`` (poisson: a renewal process of gap cv² ``cv2``, Poisson at 1; bursty:
    :func:`bursty_arrivals`, which sets its own variability, so ``cv2`` must stay 1)."""
    if kind == "poisson":
        return renewal_arrivals(rate_rps, rng, cv2)
    if kind == "bursty":
        if cv2 != 1.0:
            raise InputError(f"arrivals: 'bursty' sets its own variability (burst_factor, burst_time_fraction, "
                             f"burst_mean_s); it cannot also take workload.arrival_cv2 = {cv2} — choose one")
        return bursty_arrivals(rate_rps, rng, shape or Burstiness())
    raise InputError(f"arrivals: unknown kind {kind!r}; choose poisson or bursty")
