"""Streamed measurements: a quantile sketch and bounded time series.

in:  one value (or one time-stamped sample) at a time
out: quantiles within a known relative error; a fixed number of time bins.

Neither keeps the samples: memory stays flat however many requests a run replays.

* :class:`QuantileSketch` — logarithmic buckets (DDSketch-style): a value x > 0 lands
  in bucket ⌊ln x / ln γ⌋, so any quantile is returned within a relative error of
  (γ − 1)/2 ≈ 0.25 % for γ = 1.005; zeros are counted apart.
* :class:`TimeSeries` — ``bins`` bins over [0, horizon); when a sample falls past the
  end, neighbouring bins merge pairwise and the width doubles, so the count stays bounded.
"""

from __future__ import annotations

import math

GAMMA = 1.005
_INV_LOG_GAMMA = 1.0 / math.log(GAMMA)


class QuantileSketch:
    __slots__ = ("counts", "zeros", "n", "total", "max")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.zeros = 0
        self.n = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        if x > self.max:
            self.max = x
        if x <= 1e-12:
            self.zeros += 1
            return
        b = math.floor(math.log(x) * _INV_LOG_GAMMA)
        counts = self.counts
        counts[b] = counts.get(b, 0) + 1

    def merge(self, other: QuantileSketch) -> None:
        for b, c in other.counts.items():
            self.counts[b] = self.counts.get(b, 0) + c
        self.zeros += other.zeros
        self.n += other.n
        self.total += other.total
        self.max = max(self.max, other.max)

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    def quantile(self, q: float) -> float:
        """The q-quantile (nearest rank), within the sketch's relative error; 0 when empty."""
        if self.n == 0:
            return 0.0
        rank = max(1, math.ceil(q * self.n))
        if rank <= self.zeros:
            return 0.0
        seen = self.zeros
        for b in sorted(self.counts):
            seen += self.counts[b]
            if seen >= rank:
                return min(self.max, 2.0 * GAMMA ** (b + 1) / (1.0 + GAMMA))  # bucket midpoint
        return self.max


class TimeSeries:
    """Per-bin maximum or sum of samples over time, in at most ``bins`` × 2 bins."""

    __slots__ = ("width", "values", "limit", "mode")

    def __init__(self, horizon_s: float, bins: int = 60, mode: str = "max"):
        self.width = max(horizon_s, 1e-6) / bins
        self.values: list[float] = [0.0] * bins
        self.limit = bins
        self.mode = mode

    def _index(self, t: float) -> int:
        i = int(t / self.width)
        while i >= 2 * self.limit:
            self._coarsen()
            i = int(t / self.width)
        if i >= len(self.values):
            self.values.extend([0.0] * (i + 1 - len(self.values)))
        return i

    def _coarsen(self) -> None:
        v = self.values
        if len(v) % 2:
            v.append(0.0)
        if self.mode == "max":
            self.values = [max(v[i], v[i + 1]) for i in range(0, len(v), 2)]
        else:
            self.values = [v[i] + v[i + 1] for i in range(0, len(v), 2)]
        self.width *= 2

    def peak(self, t: float, value: float) -> None:
        i = self._index(t)
        if value > self.values[i]:
            self.values[i] = value

    def add_span(self, t0: float, t1: float, rate: float) -> None:
        """Add ``rate`` × time over [t0, t1), split over the bins it covers (mode 'sum')."""
        while t1 > t0:
            i = self._index(t0)
            end = (i + 1) * self.width
            if end <= t0:  # t0 sits on a bin edge up to rounding
                end = t0 + self.width
            end = min(t1, end)
            self.values[i] += rate * (end - t0)
            t0 = end

    def times(self) -> list[float]:
        return [round(i * self.width, 6) for i in range(len(self.values))]
