"""Arrival processes: Poisson, and bursty (a two-state Markov-modulated Poisson process).

in:  a mean rate (req/s), a seeded ``random.Random``
out: an endless iterator of arrival times (s), increasing; :func:`interarrival_cv2` (the variability
     of measured arrival times, for ``WorkloadSpec.arrival_cv2``).

Bursty: the process alternates between a *burst* state (rate ``burst_factor`` × mean)
and a quiet state, spending ``burst_time_fraction`` of the time in bursts of mean
length ``burst_mean_s``; the quiet rate is set so the long-run mean is the given rate.
"""

from __future__ import annotations

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


def arrivals(kind: str, rate_rps: float, rng: random.Random, shape: Burstiness | None = None) -> Iterator[float]:
    if kind == "poisson":
        return poisson_arrivals(rate_rps, rng)
    if kind == "bursty":
        return bursty_arrivals(rate_rps, rng, shape or Burstiness())
    raise InputError(f"arrivals: unknown kind {kind!r}; choose poisson or bursty")
