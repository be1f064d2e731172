"""The interpolation tree of one op table: exact on grid points, log-log between, monotone along
the last axis, None outside (standard library only; :mod:`placer.kernels.tables` says why).

Along the last axis a leaf is a monotone piecewise-cubic Hermite curve (PCHIP, Fritsch–Carlson
slopes) through the cleaned points in log(1 + x), log(seconds): a power law is reproduced
exactly, the curvature of a cost that turns from fixed to quadratic (prefill attention) is
followed instead of cut by chords, and nothing overshoots. A staircase (GEMM latency in m: one
step per tile, measured on both sides of each step) is better served by straight segments,
which a family asks for with ``cubic=False``. Along the other axes the two
bracketing sub-tables blend linearly in log-log.

in:  {axis values: seconds} of one exact-match key (a ragged grid is fine)
out: :func:`build_tree` → (tree, the clean-up's largest relative move); :func:`tree_log_seconds`
     → log seconds at a query, or None outside a measured range in any axis.
"""

from __future__ import annotations

import math
from bisect import bisect_left

#: a staircase gap up to this many tiles is flat beside its step (one wave of tiles, the same weight
#: read); a wider gap grows with the rows (more waves), so straight segments there
STAIRCASE_SPAN_TILES = 4

# a node is (log1p axis values ascending, children): children are nodes, or log seconds at a leaf
Node = tuple


def _pava(values: list[float]) -> list[float]:
    """A non-decreasing fit robust to single outliers: pool-adjacent-violators where a pooled
    block takes the MEDIAN of its members (least absolute deviations, not least squares), then a
    running maximum. One slow hiccup in a series is pulled down to its neighbours instead of
    lifting every larger shape after it; a monotone series is returned unchanged."""
    if all(b >= a for a, b in zip(values, values[1:])):
        return list(values)
    blocks: list[list[float]] = []  # each block: its members, in order
    for v in values:
        blocks.append([v])
        while len(blocks) > 1 and _median(blocks[-2]) > _median(blocks[-1]):
            last = blocks.pop()
            blocks[-1].extend(last)
    out: list[float] = []
    for members in blocks:
        out.extend([_median(members)] * len(members))
    top, result = -math.inf, []
    for v in out:
        top = max(top, v)
        result.append(top)
    return result


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def build_tree(points: dict[tuple[float, ...], float], cubic: bool = True, tile: int = 0) -> tuple[Node, float]:
    """(tree, largest relative move of the monotone clean-up) from {axis values: seconds};
    ``cubic`` False: linear in log-log along the last axis too (a staircase, like GEMM's tiles);
    ``tile`` (with ``cubic`` False): the last axis steps just after multiples of ``tile``
    (:func:`_staircase`)."""
    moved = 0.0

    def build(items: list[tuple[tuple[float, ...], float]], depth: int) -> Node:
        nonlocal moved
        groups: dict[float, list] = {}
        for axes, s in items:
            groups.setdefault(axes[depth], []).append((axes, s))
        xs = sorted(groups)
        if depth == len(items[0][0]) - 1:
            raw = [math.log(groups[x][0][1]) for x in xs]
            clean = _pava(raw)
            moved = max([moved] + [abs(math.exp(c - r) - 1) for c, r in zip(clean, raw)])
            lxs = tuple(math.log1p(x) for x in xs)
            return lxs, tuple(clean), tuple(xs), (_slopes(lxs, clean) if cubic else (tile or None))
        return tuple(math.log1p(x) for x in xs), tuple(build(groups[x], depth + 1) for x in xs), tuple(xs), None

    return build(list(points.items()), 0), moved


def tree_log_seconds(node: Node, query: tuple[float, ...], depth: int = 0) -> float | None:
    """log seconds at ``query`` from the tree (None outside a measured range)."""
    xs, children, _, slopes = node
    lx = math.log1p(query[depth])
    leaf = depth == len(query) - 1
    i = bisect_left(xs, lx - 1e-12)
    if i == len(xs):
        return None
    if abs(xs[i] - lx) <= 1e-12:
        return children[i] if leaf else tree_log_seconds(children[i], query, depth + 1)
    if i == 0:
        return None
    lo, hi = children[i - 1], children[i]
    if not leaf:
        lo, hi = tree_log_seconds(lo, query, depth + 1), tree_log_seconds(hi, query, depth + 1)
        if lo is None or hi is None:
            return None
    h = xs[i] - xs[i - 1]
    t = (lx - xs[i - 1]) / h
    if isinstance(slopes, int):
        return _staircase(node[2][i - 1], node[2][i], query[depth], lo, hi, slopes, t)
    if slopes is None:
        return lo + t * (hi - lo)
    t2, t3 = t * t, t * t * t
    return ((2 * t3 - 3 * t2 + 1) * lo + (t3 - 2 * t2 + t) * h * slopes[i - 1]
            + (3 * t2 - 2 * t3) * hi + (t3 - t2) * h * slopes[i])


def _slopes(xs: tuple[float, ...], ys: list[float]) -> tuple[float, ...]:
    """Fritsch–Carlson slopes of a monotone piecewise-cubic Hermite interpolant (PCHIP): exact at
    the points, monotone between them wherever the points are, no overshoot."""
    n = len(xs)
    if n < 2:
        return (0.0,) * n
    h = [xs[k + 1] - xs[k] for k in range(n - 1)]
    d = [(ys[k + 1] - ys[k]) / h[k] for k in range(n - 1)]
    if n == 2:
        return (d[0], d[0])
    m = [0.0] * n
    for k in range(1, n - 1):
        if d[k - 1] * d[k] > 0:
            w1, w2 = 2 * h[k] + h[k - 1], h[k] + 2 * h[k - 1]
            m[k] = (w1 + w2) / (w1 / d[k - 1] + w2 / d[k])
    for end, (h0, h1, d0, d1) in ((0, (h[0], h[1], d[0], d[1])), (n - 1, (h[-1], h[-2], d[-1], d[-2]))):
        slope = ((2 * h0 + h1) * d0 - h0 * d1) / (h0 + h1)
        if slope * d0 <= 0:
            slope = 0.0
        elif d0 * d1 <= 0 and abs(slope) > 3 * abs(d0):
            slope = 3 * d0
        m[end] = slope
    return tuple(m)


def _staircase(a: float, b: float, q: float, lo: float, hi: float, tile: int, t: float) -> float:
    """log seconds at ``q`` between measured ``a`` < q < ``b`` on a staircase axis (GEMM rows: the
    time steps up once per ``tile`` rows, just after each multiple, and the database measures both
    sides of each step: m = j·tile and j·tile + 1). Where only one side of a step is measured, the
    other side is inferred from it: ``b`` = j·tile + 1 with j·tile ≥ q is the first row of a new tile,
    so q sits on the step's lower side, in ``a``'s tile (``a``'s time); ``a`` = j·tile < q is the
    last row of a tile, so q sits past the step, in ``b``'s (``b``'s time). Elsewhere straight
    log-log segments, as before."""
    if b - a <= STAIRCASE_SPAN_TILES * tile:
        if b % tile == 1 and q <= b - 1 and a < b - 1 and not a % tile == 0:
            return lo
        if a % tile == 0 and q > a and a + 1 < b and not b % tile == 1:
            return hi
    return lo + t * (hi - lo)
