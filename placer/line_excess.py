"""The WAN line's mean excess per second of a transfer's size when P instances feed it (issue 42): each P
instance's KV leaves at its prefills' ends, so the line is not fed Poisson arrivals, and a transfer meets few
of its own instance's (split from :mod:`placer.ttft_tail`, which re-exports it).

in:  the streams onto one line (:class:`LineStream`: rate, size moments, arrival c², and where known the P
     instance that sends them, :class:`Departures` from its queue's law, :func:`departures_of`)
out: :func:`line_excess_factors` (per stream, the mean excess per second of size), :func:`line_excess_at`
     (per stream and per size, a size's own; with a size's own prefill, its instance's last departure before
     it) — wired per P instance and class by :mod:`placer.line_law` for the evaluation's TTFT law

Checked on the simulator's line (:class:`placer.sim.links.WanLink`, tests/placer/test_line_tail.py).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from placer.queueing import WaitModel, spread_points


@dataclass(frozen=True)
class LineStream:
    """One stream of KV transfers onto a line (the departures of one P queue, say): ``rate_per_s``
    transfers a second, their size's mean ``mean_s`` and second moment ``second_s2`` in seconds at the
    line's full rate, and the squared coefficient of variation ``arrival_cv2`` of the gaps between them
    (1: Poisson; below 1: regulated, as the departures of a busy queue are)."""

    rate_per_s: float
    mean_s: float
    second_s2: float
    arrival_cv2: float = 1.0
    departures: Departures | None = None
    """The P instance whose prefills' ends send these transfers (:func:`departures_of`), where known: its
    transfers leave at least a prefill apart, so its own overlap on the line is its departures' renewal
    count (:func:`line_excess_factors`)."""


@dataclass(frozen=True)
class Departures:
    """One first-come-first-served P instance's departures: its requests' service times as points
    ((probability, seconds), ...), the share of time it prefills (ρ) and its arrivals' rate. After a
    departure the next comes one service later if a request waits (probability ρ), else after an idle
    spell (exponential, Poisson arrivals) and a service: a gap G = S + B·Exp(λ), B ~ Bernoulli(1 − ρ)
    (:func:`placer.line_law.departure_cv2`'s gap, taken iid as QNA does)."""

    service: tuple[tuple[float, float], ...]
    busy: float
    rate_per_s: float

    def gap_cdf(self, t: np.ndarray) -> np.ndarray:
        """P(G ≤ t) on an array of times."""
        out = np.zeros_like(t)
        for p, s in self.service:
            after = np.maximum(t - s, 0.0)
            out += p * np.where(t >= s, self.busy + (1.0 - self.busy) * -np.expm1(-self.rate_per_s * after), 0.0)
        return out

    def renewal(self, t_max: float, steps: int = 600) -> tuple[np.ndarray, np.ndarray]:
        """(times, U) on [0, t_max]: U(t) the expected earlier departures within t of a departure, Σₙ
        P(G₁ + … + Gₙ ≤ t) — the renewal equation U = F + U * dF on a grid (trapezoids) up to 30 mean gaps,
        then its asymptote's slope 1/E[G] (cached)."""
        return _renewal(self, t_max, steps)


@functools.lru_cache(maxsize=512)
def _renewal(dep: Departures, t_max: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    mean_gap = sum(p * s for p, s in dep.service) + (1.0 - dep.busy) / dep.rate_per_s
    t_grid = min(t_max, 30.0 * mean_gap)
    times = np.linspace(0.0, t_grid, steps + 1)
    cdf = dep.gap_cdf(times)
    jumps = np.diff(cdf)
    u = np.zeros_like(times)
    for i in range(1, steps + 1):  # U_i = F_i + Σ_j jump_j·(U_{i−j} + U_{i−j+1})/2, U_i on both sides
        rest = float(np.dot(jumps[1:i], u[i - 2::-1][:i - 1] + u[i - 1:0:-1][:i - 1])) / 2 if i > 1 else 0.0
        u[i] = (cdf[i] + jumps[0] * u[i - 1] / 2 + rest) / (1.0 - jumps[0] / 2)
    if t_max > t_grid:  # past 30 gaps U grows at the departures' rate
        more = np.linspace(t_grid, t_max, steps + 1)[1:]
        times = np.concatenate((times, more))
        u = np.concatenate((u, u[-1] + (more - t_grid) / mean_gap))
    return times, u


def departures_of(law: WaitModel) -> Departures | None:
    """A P instance's :class:`Departures` from its queue's law: its service points (else two points of its
    service's mean and variance). One that packs prompts (``law.ride`` = r > 0) sends its KV at its
    forwards' ends (:func:`placer.line_law.forward_cv2`): its departures are its forwards, 1 − r of its
    arrivals, each 1/(1 − r) arrivals' work (its service points scaled). None where it is idle or saturated."""
    if not 0.0 < law.rho < 1.0 or law.mean_s <= 0.0:
        return None
    points = law.service or tuple((p, law.mean_s * f) for p, f in
                                  spread_points(max(law.second_moment_s2 / law.mean_s ** 2 - 1.0, 0.0)))
    heads = 1.0 - min(max(law.ride, 0.0), 0.95)
    return Departures(tuple((p, t / heads) for p, t in points), law.rho, law.rho / law.mean_s * heads)


def line_excess_factors(streams: tuple[LineStream, ...] | list[LineStream]) -> tuple[float, ...]:
    """Per stream, the mean excess of its transfers over their unloaded time, per second of their own
    size: a transfer of b seconds from stream k is slowed by b·x_k on average.

    With Poisson streams every x_k is the M/G/1-PS ρ/(1 − ρ) (ρ the line's utilisation). A regulated
    stream (c_a² < 1) brings its bytes more evenly, so fewer transfers overlap: the line's load
    fluctuates by the variance of the work arriving, per second Σ λ_k(c_a,k²·m_k² + Var S_k) (renewal
    streams; Σ λ_k E[S_k²] when Poisson), and a regulated stream's transfer finds the Poisson count
    scaled by that ratio R (Kingman's two-moment scaling of the waiting work):
    x_reg = R·ρ/(1 − ρ). A Poisson stream finds the line's time-average count L (PASTA), and
    Little's law over the line ties L to every stream's sojourn: L = Σ ρ_k(1 + x_k), so with
    x_pois = L, L = (Σ_reg ρ_k(1 + x_k) + ρ_pois)/(1 − ρ_pois). All Poisson: R = 1 and both give
    ρ/(1 − ρ). A stream burstier than Poisson (c_a² > 1) is taken as Poisson (its batches are
    :func:`line_batchmates`' part).

    On the simulator's line (:class:`placer.sim.links.WanLink`, tests/placer/test_line_tail.py and the
    grid of issue 42: a gamma-renewal stream of two sizes carrying 30–70 % of the work at c_a² 0.25–1,
    the rest Poisson small transfers, ρ 0.5–0.9) the Poisson stream's factor is within 6 % and the
    regulated one's within 20 % (+13–18 % at c_a² 0.25 carrying 70 % of the work; −15 % and −24 % where
    it carries 30 % at ρ 0.7 and 0.5); the Poisson law's factor was up to 3x too high. c_a² alone does
    not fix a stream's regularity: the flagship's heavy P queue's departures (c_a² 0.46, but few gaps
    shorter than a transfer) slow the line as a gamma stream of c_a² ≈ 0.3 does (issue 42).
    :func:`placer.line_law.line_stream_utilizations` feeds it each P instance's departures (c² from its
    own queue's law, :func:`placer.line_law.departure_cv2`) for the evaluation's TTFT law; the MILP keeps
    the Poisson factor, which bounds these from above.

    That renewal law stands where some regulated stream's P instance is unknown; where each is known
    (:attr:`LineStream.departures`) the processor-sharing law of what a transfer meets (:func:`_found_factors`)
    replaces it: within 5 % of the flagship's line fed by its P instances (the renewal law: +40 %).
    """
    rho = sum(s.rate_per_s * s.mean_s for s in streams)
    if rho <= 0.0:
        return tuple(0.0 for _ in streams)
    rho = min(rho, 1.0 - 1e-6)
    if not any(s.arrival_cv2 < 1.0 and s.departures is None for s in streams):
        return _found_factors(streams, rho)
    regulated_x = work_dispersion(streams) * rho / (1.0 - rho)
    regulated = [s.arrival_cv2 < 1.0 for s in streams]
    rho_pois = sum(s.rate_per_s * s.mean_s for s, r in zip(streams, regulated) if not r)
    held = sum(s.rate_per_s * s.mean_s * (1.0 + regulated_x) for s, r in zip(streams, regulated) if r)
    found = (held + rho_pois) / max(1.0 - rho_pois, 1e-6)
    return tuple(regulated_x if r else found for r in regulated)


def work_dispersion(streams: tuple[LineStream, ...] | list[LineStream]) -> float:
    """R: the variance of the work the streams bring the line per second, Σ λ_k(c_a,k²·m_k² + Var S_k) (renewal
    streams), over a Poisson line's of the same sizes, Σ λ_k E[S_k²] — 1 where every stream is Poisson, below
    where some are regulated (a stream burstier than Poisson is taken as Poisson: its batches are counted apart,
    :func:`placer.ttft_tail.line_batchmates`)."""
    work_var = sum(s.rate_per_s * (min(max(s.arrival_cv2, 0.0), 1.0) * s.mean_s ** 2 + max(s.second_s2 - s.mean_s ** 2, 0.0))
                   for s in streams)
    poisson_var = sum(s.rate_per_s * max(s.second_s2, s.mean_s ** 2) for s in streams)
    return work_var / poisson_var if poisson_var > 0.0 else 1.0


def _found_factors(streams, rho: float) -> tuple[float, ...]:
    """:func:`line_excess_factors` where every regulated stream's P instance is known (``departures``).

    On a processor-sharing line a transfer's excess is the service the others get while it is there, and
    two transfers on the line delay each other by the same service: both get equal shares until one ends.
    A transfer of b seconds from stream k meets (each of its two size points apart, then averaged by size):

    * another stream j's transfers on the line when it starts — their time-average count L_j = ρ_j(1 + x_j)
      (Little), independent of its own start — each delaying it min(R, b), R what is left of one, in work
      the equilibrium residual of j's sizes: E[min(R, b)] = E[S·c − c²/2]/E[S], c = min(S, b);
    * j's transfers that start while it is there, λ_j·b(1 + x_k) of them (Poisson in time), each delaying it
      min(S, what is left of it), that left falling evenly from b to 0: E[S − S²/(2b)] where S < b, b/2 else;
    * its own instance's earlier transfers still on the line (:meth:`_Line._own`: at least a prefill older,
      :class:`Departures`' renewal count), and its later ones; a stream of unknown instance is its own
      Poisson j.

    With every stream Poisson, a small transfer meets the M/G/1-PS count found and a large one the work
    arriving in its stay, both ρ/(1 − ρ) per second; a regulated instance's transfers meet few of their own.
    A renewal stream of the same c² (the law before, Kingman's scaling of the line's work) lets two of an
    instance's transfers leave much closer than a prefill: on the flagship's line the 80 % busy heavy
    instance's excess was 2.5 per second of size where the simulator's line gives 1.8 (tests/placer/
    test_line_tail.py), and a large transfer met the small ones' count found, not their work in its stay."""
    line = _Line(streams, rho)
    return tuple(line.x)


def line_excess_at(streams: tuple[LineStream, ...] | list[LineStream],
                   sizes: list[list[float]]) -> tuple[tuple[float, ...], ...]:
    """Per stream and per transfer size of it (``sizes[k]``, seconds at the line's full rate), its mean
    excess per second of that size. A small transfer meets what is on the line when it starts, a large one
    also what comes while it is there: where every P instance feeding the line is known (:func:`_found_factors`)
    each size has its own, else every size of a stream its stream's :func:`line_excess_factors`. On the
    flagship's line the light queue's transfers of 0.002 s meet 2.9 per second of size, those of 0.08 s 2.0:
    the light instance's earlier forwards' transfers, on the line when a short one starts, are gone before a
    long one is half done."""
    rho = sum(s.rate_per_s * s.mean_s for s in streams)
    if rho <= 0.0 or rho >= 1.0 or any(s.arrival_cv2 < 1.0 and s.departures is None for s in streams):
        factors = line_excess_factors(streams)
        return tuple(tuple(f for _ in row) for f, row in zip(factors, sizes))
    line = _Line(streams, rho)
    out = []
    for k, row in enumerate(sizes):
        pairs = [(item, None) if isinstance(item, (int, float)) else item for item in row]
        out.append(tuple(line.met(k, max(b, 1e-9), gap) / max(b, 1e-9) for b, gap in pairs))
    return tuple(out)


class _Line:
    """:func:`_found_factors`' line: each stream's two size points (its sizes' mean and variance), its
    instance's renewal count where known, and the factors x solved."""

    def __init__(self, streams, rho: float):
        self.streams = streams
        upper = rho / (1.0 - rho)  # the Poisson count
        self.points, self.tables = [], []
        for s in streams:
            sd = math.sqrt(max(s.second_s2 - s.mean_s * s.mean_s, 0.0))
            sizes = (max(s.mean_s - sd, 1e-12), s.mean_s + sd)
            self.points.append(sizes)
            if s.departures is None:
                self.tables.append(None)
                continue
            times, u = s.departures.renewal(max(sizes[1] * (1.0 + upper), 1e-9))
            self.tables.append((times, u, min(s.rate_per_s / s.departures.rate_per_s, 1.0)))
        self.x = [upper] * len(streams)
        for it in range(300):  # the fixed point in x (damped after 50 rounds, should it swing)
            self.held = [s.rate_per_s * s.mean_s * (1.0 + xj) for s, xj in zip(streams, self.x)]
            new = [sum(self.met(k, b) for b in self.points[k]) / 2 / s.mean_s for k, s in enumerate(streams)]
            done = max(abs(a - b) for a, b in zip(new, self.x)) < 1e-6 * (1.0 + max(new))
            step = 1.0 if it < 50 else 0.5
            self.x = [step * a + (1.0 - step) * b for a, b in zip(new, self.x)]
            if done:
                break
        self.held = [s.rate_per_s * s.mean_s * (1.0 + xj) for s, xj in zip(streams, self.x)]

    def met(self, k: int, b: float, first_gap_s: float | None = None) -> float:
        """Mean seconds a transfer of b seconds from stream k is delayed by the others on the line; with
        ``first_gap_s``, its own prefill: its instance's last departure before it was that long before it
        (or an idle spell more), not a random gap."""
        total = 0.0
        for j, other in enumerate(self.streams):
            if j == k and self.tables[k] is not None:
                continue
            found = self.held[j] * sum(sj * min(sj, b) - min(sj, b) ** 2 / 2 for sj in self.points[j]) / 2 / other.mean_s
            later = other.rate_per_s * b * (1.0 + self.x[k]) * sum(
                sj - sj * sj / (2 * b) if sj < b else b / 2 for sj in self.points[j]) / 2
            total += found + later
        if self.tables[k] is not None:
            total += self._own(k, b, first_gap_s)
        return total

    def _own(self, k: int, b: float, first_gap_s: float | None = None) -> float:
        """Seconds a transfer of b from stream k is delayed by its own instance's other transfers: each that
        left a before it (Σₙ P(Γₙ ≤ a), the departures' renewal count, a share p crossing this line) and is
        still on the line delays it min(b′ − a/(1 + x), b) (what is left of it: it moves at 1/(1 + x) of the
        line's rate on average; under processor sharing two transfers get equal service until one ends), and
        each that leaves a after it min(b′, b − a/(1 + x)). Poisson (exponential sizes): the M/G/1-PS count."""
        times, u, share = self.tables[k]
        dens = np.diff(u)
        before = dens
        if first_gap_s is not None:  # U₁ = F₁ + F₁ * U: the first gap its own prefill, the rest the stream's
            dep = self.streams[k].departures
            mine = Departures(((1.0, first_gap_s),), dep.busy, dep.rate_per_s).gap_cdf(times)
            before = np.diff(mine + np.convolve(np.diff(mine, prepend=0.0), u)[:len(u)])
        slow = 0.5 * (times[1:] + times[:-1]) / (1.0 + self.x[k])
        total = 0.0
        for b_other in self.points[k]:
            total += float(np.dot(before, np.clip(np.minimum(b_other - slow, b), 0.0, None)))
            total += float(np.dot(dens, np.clip(np.minimum(b - slow, b_other), 0.0, None)))
        return share * total / len(self.points[k])
