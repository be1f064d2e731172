"""Measured latency tables and interpolation in them (standard library only).

in:  the latencies an engine measured for one (chip, tp, model, weight dtype, KV dtype):
     prefill — seconds of ONE forward by (new tokens in the forward, cached context
     before it); decode — seconds of one step by (batch, context tokens per sequence)
out: :class:`MeasuredTable`, whose :meth:`Grid.seconds_at` answers a query inside the
     grid's hull and ``None`` outside it (the caller falls back to the roofline).

Interpolation, and why (the bar: "every prediction says where it came from"):

* **Axes in log(1 + x), latency in log(seconds).** Latency grows like a power of the
  size once past the fixed costs (compute ∝ tokens, KV read ∝ batch × context), so
  log-log is close to linear between grid points where linear is not; ``1 + x`` lets
  a context of 0 (a cold prompt) be a grid line.
* **Bilinear in each cell.** With non-decreasing values at the four corners, a
  bilinear patch is non-decreasing along each axis (each edge is a convex combination
  of ordered corners), and exp() keeps the order: monotone grid → monotone answers.
* **Isotonic clean-up first.** Measured medians carry noise (a step at batch 2 may
  time 1 % faster than at batch 1); the performance model's callers (the batch
  bisection of ``max_batch``) need latency non-decreasing in every axis. The grid is
  cleaned by 1-D isotonic regression (pool-adjacent-violators, least squares on
  log-seconds) along each axis in turn, then a running maximum along each axis
  guarantees the order exactly. ``max_cleanup_rel`` records how far that moved any
  point, so a badly non-monotone table is visible, not hidden.
* **Outside the hull, no extrapolation.** A query beyond the measured range is not
  answered here (``None``): the measured model falls back to the roofline and says so.
  What the grid still knows there is a bound (:meth:`Grid.bounds`): latency does not
  fall as size or context grow, so a query above the grid in some axis takes at least
  the grid's answer at the query clamped into the grid, and a query below it at most
  that. The measured model holds the roofline inside these bounds, so a chip measured
  slow at batch 128 is not predicted fast at batch 129 (``max_batch`` bisects on a
  step time that must not fall with the batch).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field

PREFILL, DECODE = "prefill", "decode"
PHASES = (PREFILL, DECODE)
#: The first axis of each phase's grid: new tokens of a prefill forward, sequences of a decode step.
SIZE_AXIS = {PREFILL: "tokens", DECODE: "batch"}
_ROUNDS = 10  # isotonic passes (alternating axes) before the running maximum
#: Most points of one phase's grid (sizes × contexts). A measured grid of 100,000 points is
#: days of device time; the bound is checked before anything of the grid's size is built, so
#: a sparse table of n rows (an n × n grid) is refused in memory of its rows, not n².
MAX_GRID_POINTS = 100_000


def _pava(values: list[float]) -> list[float]:
    """Least-squares non-decreasing fit (pool adjacent violators), equal weights."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, n2 = blocks.pop()
            m1, n1 = blocks[-1]
            blocks[-1] = [(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2]
    out: list[float] = []
    for mean, count in blocks:
        out.extend([mean] * int(count))
    return out


def _columns(rows: list[list[float]]) -> list[list[float]]:
    return [list(col) for col in zip(*rows)]


def monotone_log_grid(seconds: list[list[float]]) -> list[list[float]]:
    """log(seconds) made non-decreasing along both axes (see the module docstring)."""
    logs = [[math.log(s) for s in row] for row in seconds]
    for _ in range(_ROUNDS):
        logs = [_pava(row) for row in logs]
        logs = _columns([_pava(col) for col in _columns(logs)])
    logs = [_running_max(row) for row in logs]
    return _columns([_running_max(col) for col in _columns(logs)])


def _running_max(values: list[float]) -> list[float]:
    out, top = [], -math.inf
    for v in values:
        top = max(top, v)
        out.append(top)
    return out


def _axis(x: float) -> float:
    return math.log1p(x)


def _bracket(grid: tuple[float, ...], x: float) -> tuple[int, float] | None:
    """(cell index i, weight of grid[i+1]) for x in [grid[0], grid[-1]]; None outside."""
    if x < grid[0] or x > grid[-1]:
        return None
    if len(grid) == 1:
        return 0, 0.0
    i = min(bisect_right(grid, x) - 1, len(grid) - 2)
    lo, hi = _axis(grid[i]), _axis(grid[i + 1])
    return i, (_axis(x) - lo) / (hi - lo)


@dataclass(frozen=True)
class Grid:
    """One phase's measurements on a full rectangular grid.

    ``sizes``: new tokens per prefill forward, or sequences per decode step (ascending);
    ``contexts``: cached tokens before the forward, or context tokens per sequence
    (ascending); ``seconds[i][j]``: the measured latency at (sizes[i], contexts[j]).
    """

    sizes: tuple[float, ...]
    contexts: tuple[float, ...]
    seconds: tuple[tuple[float, ...], ...]
    _log: tuple[tuple[float, ...], ...] = field(init=False, repr=False, compare=False)
    max_cleanup_rel: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        _check_grid_size(len(self.sizes), len(self.contexts), "grid")
        for name in ("sizes", "contexts"):
            axis = getattr(self, name)
            if any(not (v >= 0 and math.isfinite(v)) for v in axis):
                raise ValueError(f"grid {name} must be finite and >= 0, got {list(axis)[:8]}")
            if not axis or any(b <= a for a, b in zip(axis, axis[1:])):
                raise ValueError(f"grid {name} must be strictly ascending and non-empty, got {list(axis)}")
        if len(self.seconds) != len(self.sizes) or any(len(r) != len(self.contexts) for r in self.seconds):
            raise ValueError(f"grid seconds must be {len(self.sizes)} x {len(self.contexts)}")
        if any(not (s > 0 and math.isfinite(s)) for row in self.seconds for s in row):
            raise ValueError("grid seconds must be positive and finite")
        clean = monotone_log_grid([list(r) for r in self.seconds])
        object.__setattr__(self, "_log", tuple(tuple(r) for r in clean))
        moved = max(abs(math.exp(c) / s - 1) for cr, sr in zip(clean, self.seconds) for c, s in zip(cr, sr))
        object.__setattr__(self, "max_cleanup_rel", moved)

    def covers(self, size: float, context: float) -> bool:
        return (self.sizes[0] <= size <= self.sizes[-1]) and (self.contexts[0] <= context <= self.contexts[-1])

    def seconds_at(self, size: float, context: float) -> float | None:
        """Interpolated seconds at (size, context) inside the grid's hull; None outside."""
        bx, by = _bracket(self.sizes, size), _bracket(self.contexts, context)
        if bx is None or by is None:
            return None
        (i, u), (j, v) = bx, by
        g = self._log
        i1, j1 = min(i + 1, len(self.sizes) - 1), min(j + 1, len(self.contexts) - 1)
        value = ((1 - u) * (1 - v) * g[i][j] + u * (1 - v) * g[i1][j]
                 + (1 - u) * v * g[i][j1] + u * v * g[i1][j1])
        return math.exp(value)

    def weights(self, size: float, context: float) -> list[tuple[tuple[int, int], float]]:
        """((i, j), weight) of the grid points :meth:`seconds_at` interpolates between (in log seconds)
        at (size, context) inside the hull; empty outside."""
        bx, by = _bracket(self.sizes, size), _bracket(self.contexts, context)
        if bx is None or by is None:
            return []
        (i, u), (j, v) = bx, by
        i1, j1 = min(i + 1, len(self.sizes) - 1), min(j + 1, len(self.contexts) - 1)
        return [((i, j), (1 - u) * (1 - v)), ((i1, j), u * (1 - v)), ((i, j1), (1 - u) * v), ((i1, j1), u * v)]

    def bounds(self, size: float, context: float) -> tuple[float | None, float | None]:
        """(lower, upper) bound on the latency at a query outside the hull, from the
        grid's answer at the query clamped into the grid: a lower bound when the query is
        at or above the grid's smallest corner in both axes, an upper bound when at or
        below its largest corner in both (None where neither order holds)."""
        clamped = self.seconds_at(min(max(size, self.sizes[0]), self.sizes[-1]),
                                  min(max(context, self.contexts[0]), self.contexts[-1]))
        above = size >= self.sizes[0] and context >= self.contexts[0]
        below = size <= self.sizes[-1] and context <= self.contexts[-1]
        return (clamped if above else None), (clamped if below else None)

    def points(self):
        """(size, context, measured seconds) of every grid point."""
        for i, size in enumerate(self.sizes):
            for j, context in enumerate(self.contexts):
                yield size, context, self.seconds[i][j]


def _check_grid_size(n_sizes: int, n_contexts: int, where: str) -> None:
    """ValueError naming the sizes when a full grid would exceed :data:`MAX_GRID_POINTS`."""
    if n_sizes * n_contexts > MAX_GRID_POINTS:
        raise ValueError(f"{where}: a {n_sizes} x {n_contexts} grid ({n_sizes * n_contexts} points) is larger "
                         f"than the {MAX_GRID_POINTS} points a measured table may have")


def grid_from_points(points: dict[tuple[float, float], float], where: str) -> Grid:
    """A :class:`Grid` from {(size, context): seconds}; every (size, context) pair of the
    distinct values must be present (``where`` names the table in the error)."""
    sizes = sorted({s for s, _ in points})
    contexts = sorted({c for _, c in points})
    _check_grid_size(len(sizes), len(contexts), where)
    missing = len(sizes) * len(contexts) - len(points)
    if missing:
        s, c = next((s, c) for s in sizes for c in contexts if (s, c) not in points)
        raise ValueError(f"{where}: the grid is not full: no measurement at ({s:g}, context {c:g}) "
                         f"({missing} missing of {len(sizes) * len(contexts)})")
    return Grid(tuple(sizes), tuple(contexts), tuple(tuple(points[(s, c)] for c in contexts) for s in sizes))


@dataclass(frozen=True)
class TableKey:
    """What a measured table belongs to: latencies hold only for this exact setting."""

    chip: str
    tp: int
    model: str
    weight_dtype: str
    kv_dtype: str

    def __str__(self) -> str:
        return f"{self.model} on {self.tp}x {self.chip} (weights {self.weight_dtype}, KV {self.kv_dtype})"


@dataclass(frozen=True)
class MeasuredTable:
    """Prefill and/or decode grids for one :class:`TableKey`, with their provenance.

    ``source``: who measured, when, with which engine and software on which device;
    ``profile``: the file (or label) it was read from, named in plans.
    """

    key: TableKey
    prefill: Grid | None
    decode: Grid | None
    source: str
    profile: str = ""

    def __post_init__(self) -> None:
        if self.prefill is None and self.decode is None:
            raise ValueError(f"measured table for {self.key}: neither a prefill nor a decode grid")

    @property
    def name(self) -> str:
        """How plans name this table: its profile file, else its provenance."""
        return self.profile or self.source

    @property
    def label(self) -> str:
        return f"measured ({self.name})"
