"""A P instance's load as a trace drifts it (issue 42): the wait over windows longer than its queue forgets.

in:  a P instance's stream from a trace, as the plan routes it — (arrival s, the share of its class's requests
     the plan sends to the instance, its prefill alone there) per request — and the instance's stationary law
out: :func:`drift_points` (the instance's load in the trace's windows, as a few (weight, load factor) points),
     :class:`DriftWait` (the stationary law, plus the law at each point for the TTFT's tail), :func:`relaxation_s`

The M/G/1 law prices a stream whose requests are independent: the work an instance receives over a window of
τ seconds then varies with variance λE[S²]·τ around ρτ. A conversation trace's classes come in runs (a
session's turns climb the hit bands together, its prompts long or short together), so the classes the plan
routes to one instance arrive unevenly over minutes: rnd-7-19-trace's dc1 H100 tp4 instances see their load's
variance over 30-s windows 1.4-1.5× a Poisson stream's of the same work (1.0 with the trace's requests shuffled,
the same requests in another order). Over windows much longer than the time the queue takes to forget its start
(:func:`relaxation_s`) the queue lives each window at that window's load (quasi-static), so its wait is the
mixture, over the windows' arrivals, of the stationary law at each window's load.

Only the variance beyond Poisson enters: a window's load from the trace is shrunk toward the mean so that its
variance is the excess (the window's own Poisson noise is the stationary law's already). Where the trace gives
fewer than :data:`MIN_WINDOWS` windows of :data:`WINDOW_RELAXATIONS` relaxation times, or its windows spread no
more than independent requests would (the dispersion test, :data:`DRIFT_SIGNIFICANCE_Z`), the stationary law
stands. Imports only the standard library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: A window is this many relaxation times of the instance's queue (quasi-static: the queue forgets its start
#: within a window, so each window lives at its own load).
WINDOW_RELAXATIONS = 4.0
#: The trace must give at least this many windows, or the load's excess variance is not read (the stationary
#: law stands).
MIN_WINDOWS = 6
#: The windows' loads are summarised on this many points of equal arrival weight.
DRIFT_POINTS = 3
#: A drift is read only where the windows' loads spread more than independent requests' would at this one-sided
#: normal quantile (95 %) of the dispersion test: their variance over the Poisson part, × (windows − 1), beyond
#: the χ² quantile with windows − 1 degrees of freedom — a few windows' variance is itself noisy (±63 % at six),
#: and an excess read off noise would put a drift into every trace.
DRIFT_SIGNIFICANCE_Z = 1.645


def relaxation_s(rho: float, rate_second_s2: float) -> float:
    """How long a work-conserving queue takes to forget where it started: 2·λE[S²]/(1 − ρ)², the relaxation
    time of its work's reflected Brownian motion (drift −(1 − ρ), variance λE[S²] a second; Abate and Whitt,
    *Transient behavior of regulated Brownian motion*, 1987) — 4·E[W]/(1 − ρ) for an M/G/1 queue, and the same
    for a processor-sharing line, whose work is a FCFS queue's. ∞ at or past saturation."""
    return 2.0 * rate_second_s2 / (1.0 - rho) ** 2 if rho < 1.0 else math.inf


def drift_points(stream: list[tuple[float, float, float]], relax_s: float) -> list[tuple[float, float]]:
    """(arrival weight, load factor) points of an instance's load over the trace's windows, or [] where the
    stationary law stands.

    ``stream``: (arrival s, p, prefill s alone) per trace request, p the share of its class the plan routes to
    the instance (the requests it gets are a random p of the class's). Windows of
    :data:`WINDOW_RELAXATIONS` × ``relax_s``; a window's load ρ_j = Σ p·S ÷ τ. Its variance less the Poisson
    part, Σ p²S² ÷ (T·τ) (a stream of independent requests' own spread, which the stationary law holds), is the
    drift's; each window's load is shrunk toward the mean to that variance, and the windows, weighted by their
    arrivals (∝ their load), are cut into :data:`DRIFT_POINTS` groups of equal weight: each group's weight and
    mean factor on the mean load."""
    if not stream or not 0.0 < relax_s < math.inf:
        return []
    tau = WINDOW_RELAXATIONS * relax_s
    t0 = min(t for t, _, _ in stream)
    windows = int((max(t for t, _, _ in stream) - t0) // tau)
    if windows < MIN_WINDOWS:
        return []
    work = [0.0] * windows
    poisson = 0.0
    for t, p, s in stream:
        j = int((t - t0) // tau)
        if j < windows:
            work[j] += p * s
            poisson += p * p * s * s
    loads = [w / tau for w in work]
    mean = sum(loads) / windows
    if mean <= 0.0:
        return []
    total = sum((x - mean) ** 2 for x in loads) / (windows - 1)
    noise = poisson / (windows * tau * tau)
    if noise <= 0.0 or (windows - 1) * total / noise <= _chi2_quantile(DRIFT_SIGNIFICANCE_Z, windows - 1):
        return []  # the windows spread no more than independent requests would: no drift is read
    excess = total - noise
    shrink = math.sqrt(excess / total)
    factors = sorted(max(0.0, 1.0 + shrink * (x / mean - 1.0)) for x in loads)
    weight = sum(factors)
    points: list[list[float]] = [[0.0, 0.0] for _ in range(DRIFT_POINTS)]
    acc = 0.0
    for f in factors:  # arrivals ∝ load; each window into the group its arrivals' middle falls in
        g = min(DRIFT_POINTS - 1, int((acc + f / 2) / weight * DRIFT_POINTS))
        points[g][0] += f
        points[g][1] += f * f
        acc += f
    return [(w / weight, fw / w) for w, fw in points if w > 0.0]


def _chi2_quantile(z: float, dof: int) -> float:
    """The χ² law's quantile with ``dof`` degrees of freedom at the standard normal's quantile ``z``
    (Wilson and Hilferty, 1931: (χ²/k)^(1/3) is nearly normal, mean 1 − 2/(9k), variance 2/(9k))."""
    h = 2.0 / (9.0 * dof)
    return dof * (1.0 - h + z * math.sqrt(h)) ** 3


@dataclass(frozen=True)
class DriftWait:
    """An instance's wait where the trace drifts its load: ``base``, the stationary law (what the utilisation,
    the relaxation, the line's streams and the planning rule read: every attribute not named here is its), and
    ``points``, ((arrival weight, the law at that point's load) …) — the TTFT tail's mixture
    (:func:`placer.queue_laws.first_token_by_length`)."""

    base: object
    points: tuple[tuple[float, object], ...]

    def __getattr__(self, name: str):
        if name in ("base", "points"):  # not set yet (unpickling): no recursion through base
            raise AttributeError(name)
        return getattr(self.base, name)
