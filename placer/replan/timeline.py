"""A workload over a day, cut into windows: diurnal rate, a burst, a shift in the class mix, a chip's
price change at an hour, a datacenter's inventory change at an hour — from a few parameters, or from a
timestamped trace.

in:  a :class:`~placer.specs.Scenario` (its workload is the *peak-hour* mix and rate) and a
     :class:`Timeline` (window length, peak/trough ratio, burst, mix shift, price change, inventory
     changes); or a
     JSONL trace with timestamps (:func:`trace_windows`)
out: ``list[Window]``: each window's start, length, mean arrival rate and the scenario that holds
     in it (rate, class shares, prices and inventory of that window)

The rate is piecewise constant per window (the mean of the continuous rate over the window): each
window is simulated at one rate. The diurnal rate is a raised cosine between the trough
(peak / ``peak_to_trough``) and the peak, highest at ``peak_hour``::

    rate(t) = trough + (peak − trough) · (1 + cos(2π (t − peak_hour) / day_s)) / 2

(one cycle per ``day_s``: a shorter "day" compresses the cycle, which the tests use).

A mix shift multiplies the shares of the classes below ``mix_shift_hit_below`` by
``1 + mix_shift`` from ``mix_shift_from_hour`` to ``mix_shift_to_hour`` (shares renormalised):
more cold, long-prefill traffic in those hours. A trace's windows are fitted with
:func:`placer.workload.fit_classes` — the function the replanning jobs fit their window with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from placer.errors import InputError
from placer.fields import parse_duration  # noqa: F401 - re-exported: the replanning options' durations
from placer.specs import Scenario
from placer.workload import fit_classes, read_trace, with_hit_rates

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
#: Points per window the mean rate is taken over (midpoint rule).
RATE_POINTS = 16


@dataclass(frozen=True)
class Timeline:
    """How the workload changes over the day (the CLI's options; see the module docstring)."""

    window_s: float = HOUR_S
    day_s: float = DAY_S
    peak_to_trough: float = 3.5  # per-window means: ~3.4 over hourly windows
    peak_hour: float = 14.0
    burst_hour: float | None = None
    burst_hours: float = 1.0
    burst_factor: float = 1.0
    mix_shift: float = 0.0
    mix_shift_hit_below: float = 0.9
    mix_shift_from_hour: float = 0.0
    mix_shift_to_hour: float = 0.0
    price_chip: str | None = None
    price_hour: float = 0.0
    price_usd_per_h: float | None = None
    #: (datacenter, chip, chips, hour): from ``hour`` on the datacenter holds ``chips`` of ``chip``
    inventory_changes: tuple[tuple[str, str, int, float], ...] = ()

    def __post_init__(self) -> None:
        def bad(name: str, value: object, want: str) -> None:
            raise InputError(f"{name}: {want}, got {value!r}")

        for name in ("window_s", "day_s", "peak_to_trough", "burst_factor", "burst_hours"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                bad(name, v, "a finite number > 0")
        if self.peak_to_trough < 1:
            bad("peak_to_trough", self.peak_to_trough, "at least 1 (peak over trough)")
        if self.window_s > self.day_s:
            bad("window_s", self.window_s, f"at most the day's {self.day_s:g} s")
        if not (math.isfinite(self.mix_shift) and self.mix_shift >= 0):
            bad("mix_shift", self.mix_shift, "a finite number >= 0")
        if self.price_chip is not None and (self.price_usd_per_h is None or self.price_usd_per_h < 0):
            bad("price_usd_per_h", self.price_usd_per_h, "a price >= 0 with price_chip")
        for change in self.inventory_changes:
            _, _, count, hour = change
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                bad("inventory_changes", change, "a whole number of chips >= 0")
            if not (math.isfinite(hour) and hour >= 0):
                bad("inventory_changes", change, "an hour >= 0")

    def rate_factor(self, t_s: float) -> float:
        """The rate at ``t_s`` over the peak rate (1 at the peak hour, 1/peak_to_trough at the trough)."""
        trough = 1.0 / self.peak_to_trough
        # the distance from the peak, wrapped into [-day/2, day/2): times at equal distances on either side
        # of the peak (or a day apart) get bit-equal phases, so windows mirrored about the peak get equal rates
        half = self.day_s / 2
        phase = 2 * math.pi * ((t_s - self.peak_hour * HOUR_S + half) % self.day_s - half) / self.day_s
        f = trough + (1.0 - trough) * (1 + math.cos(phase)) / 2
        if self.burst_hour is not None:
            if self.burst_hour * HOUR_S <= t_s < (self.burst_hour + self.burst_hours) * HOUR_S:
                f *= self.burst_factor
        return f

    def mean_factor(self, start_s: float, length_s: float) -> float:
        """The window's mean rate factor (midpoint rule). ``math.fsum`` is exactly rounded, so the mean does
        not depend on the order of its points: two windows mirrored about the peak have the same rate to the
        bit, hence the same workload — the day's loop solves and simulates it once (its caches' keys)."""
        step = length_s / RATE_POINTS
        return math.fsum(self.rate_factor(start_s + (i + 0.5) * step) for i in range(RATE_POINTS)) / RATE_POINTS


@dataclass(frozen=True)
class Window:
    """One window of the day: ``scenario`` is the workload (rate, mix) and prices that hold in it."""

    index: int
    start_s: float
    length_s: float
    rate_rps: float
    scenario: Scenario

    @property
    def requests(self) -> float:
        """Requests offered in the window."""
        return self.rate_rps * self.length_s


def _shares(scenario: Scenario, timeline: Timeline, mid_s: float) -> list | None:
    classes = scenario.workload.classes
    hour = (mid_s / HOUR_S) % 24
    shifted = timeline.mix_shift_from_hour <= hour < timeline.mix_shift_to_hour
    if not classes or timeline.mix_shift == 0 or not shifted:
        return classes
    raw = [c.share * (1 + timeline.mix_shift if c.hit_rate < timeline.mix_shift_hit_below else 1.0) for c in classes]
    total = sum(raw)
    return [c.model_copy(update={"share": r / total}) for c, r in zip(classes, raw)]


def _priced(scenario: Scenario, timeline: Timeline, start_s: float) -> Scenario:
    if timeline.price_chip is None or start_s < timeline.price_hour * HOUR_S:
        return scenario
    names = [c.name for c in scenario.chips]
    if timeline.price_chip not in names:
        raise InputError(f"price_chip: {timeline.price_chip!r} is not one of the scenario's chips: entries "
                         f"({', '.join(names) or 'none'}); a price change applies to a chip the scenario defines")
    chips = [c.model_copy(update={"price_usd_per_h": timeline.price_usd_per_h}) if c.name == timeline.price_chip
             else c for c in scenario.chips]
    return scenario.model_copy(update={"chips": chips})


def _inventoried(scenario: Scenario, timeline: Timeline, start_s: float) -> Scenario:
    """The scenario with each inventory change whose hour has come (later ones over earlier ones)."""
    due = sorted((c for c in timeline.inventory_changes if start_s >= c[3] * HOUR_S), key=lambda c: c[3])
    if not due:
        return scenario
    dcs = {dc.name: dict(dc.inventory) for dc in scenario.datacenters}
    chips = {c.name for c in scenario.chips} | {chip for inv in dcs.values() for chip in inv}
    for dc, chip, count, _ in due:
        if dc not in dcs:
            raise InputError(f"inventory_change: datacenter {dc!r} is not one of the scenario's datacenters: "
                             f"entries ({', '.join(dcs)})")
        if chip not in chips:
            raise InputError(f"inventory_change: chip {chip!r} is not one of the scenario's chips: entries "
                             f"({', '.join(sorted(chips))})")
        dcs[dc][chip] = count
    return scenario.model_copy(update={"datacenters": [
        dc.model_copy(update={"inventory": dcs[dc.name]}) for dc in scenario.datacenters]})


def windows(scenario: Scenario, timeline: Timeline) -> list[Window]:
    """The day's windows: the scenario's ``arrival_rps`` is the peak rate, its classes the base mix."""
    if scenario.is_fleet or not scenario.workload.classes:
        raise InputError("scenario: replanning in simulation needs a single-model scenario with workload.classes")
    peak = scenario.workload.arrival_rps
    out, start, i = [], 0.0, 0
    while start < timeline.day_s - 1e-9:
        length = min(timeline.window_s, timeline.day_s - start)
        rate = peak * timeline.mean_factor(start, length)
        workload = scenario.workload.model_copy(update={"arrival_rps": rate,
                                                        "classes": _shares(scenario, timeline, start + length / 2)})
        held = _inventoried(scenario.model_copy(update={"workload": workload}), timeline, start)
        out.append(Window(i, start, length, rate, _priced(held, timeline, start)))
        start, i = start + length, i + 1
    return out


def fit_window(records: list, length_s: float, options) -> tuple[float, list]:
    """A window's served requests → (arrival rate, fitted classes), as a replanning job fits its window
    (``placer.service.jobs.workload``: :func:`placer.workload.fit_classes` with the scenario's filter
    thresholds, the rate as requests over the window)."""
    classes = fit_classes(records, filter_max_output_tokens=options.filter_max_output_tokens,
                          filter_max_hit_rate=options.filter_max_hit_rate,
                          filter_min_input_tokens=options.filter_min_input_tokens)
    return len(records) / length_s, classes


def trace_windows(path: str | Path, window_s: float, scenario: Scenario | None = None,
                  min_requests: int = 20) -> list[tuple[float, float, list | None]]:
    """A timestamped JSONL trace cut into windows from its first request: ``(start_s, rate_rps, classes)``
    per window, classes None where fewer than ``min_requests`` fall in it."""
    if not (math.isfinite(window_s) and window_s > 0):
        raise InputError(f"window: a duration > 0, got {window_s!r}")
    records = list(with_hit_rates(read_trace(path)))
    if not records:
        raise InputError(f"trace {str(path)!r}: no requests")
    t0 = records[0].timestamp_s
    buckets: dict[int, list] = {}
    for r in records:
        buckets.setdefault(int((r.timestamp_s - t0) // window_s), []).append(r)
    opts = scenario.options if scenario is not None else None
    out = []
    for k in range(max(buckets) + 1):
        rows = buckets.get(k, [])
        if len(rows) < max(2, min_requests):
            out.append((k * window_s, len(rows) / window_s, None))
            continue
        if opts is not None:
            rate, classes = fit_window(rows, window_s, opts)
        else:
            rate, classes = len(rows) / window_s, fit_classes(rows)
        out.append((k * window_s, rate, classes))
    return out
