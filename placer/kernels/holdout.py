"""The per-op held-out check of the measured tables: every fifth shape predicted from the rest.

in:  one shipped (system, engine, version)'s tables (:func:`placer.kernels.tables.load`)
out: :func:`holdout` → per family: shapes held out, how many the rest still covers (inside the
     remaining grid), and the median / P90 relative error |predicted / measured − 1| of those.

Within each exact-match key the shapes are sorted (by every axis, the last axis fastest) and
every fifth one (index 2, 7, 12, …) is removed; the tree is rebuilt from the others with the
same rule the planner uses (:func:`placer.kernels.tables.build_tree`: log-log, monotone along
the last axis) and asked for each removed shape. The truth is the shipped measurement (the
median of the database's repeats), not the cleaned grid.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from placer.kernels.tables import FAMILIES, OpTables, _key, build_tree, read_rows, tree_log_seconds


@dataclass(frozen=True)
class FamilyError:
    family: str
    held_out: int
    covered: int
    median_rel: float | None
    p90_rel: float | None


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo])


def holdout_family(tables: OpTables, family: str, every: int = 5) -> FamilyError | None:
    """The held-out error of one family (None if the family is not shipped)."""
    path = tables._path(family)
    if path is None:
        return None
    grouped = _points(tables, family)
    errors: list[float] = []
    held = 0
    for points in grouped.values():
        shapes = sorted(points)
        out = {s for i, s in enumerate(shapes) if i % every == every // 2}
        rest = {s: v for s, v in points.items() if s not in out}
        if not out or not rest:
            continue
        tree, _ = build_tree(rest, cubic=FAMILIES[family].cubic, tile=FAMILIES[family].tile)
        for shape in out:
            held += 1
            log_s = tree_log_seconds(tree, shape)
            if log_s is not None:
                errors.append(abs(math.exp(log_s) / points[shape] - 1))
    if not held:
        return None
    return FamilyError(family, held, len(errors), statistics.median(errors) if errors else None,
                       _quantile(errors, 0.9) if errors else None)


def _points(tables: OpTables, family: str) -> dict[tuple, dict[tuple[float, ...], float]]:
    fam, grouped = FAMILIES[family], {}
    path = tables._path(family)
    for row in read_rows(path) if path else []:
        grouped.setdefault(_key(row[k] for k in fam.keys), {})[tuple(float(row[a]) for a in fam.axes)] = \
            float(row["latency_s"])
    return grouped


def against(tables: OpTables, reference: OpTables) -> list[FamilyError]:
    """Every shape ``reference`` has and ``tables`` lacks (e.g. the rows thinning left out),
    predicted from ``tables``: what leaving them out costs."""
    results = []
    for family in FAMILIES:
        mine, theirs = _points(tables, family), _points(reference, family)
        errors, held = [], 0
        for key, points in theirs.items():
            for shape, seconds in points.items():
                if shape in mine.get(key, {}):
                    continue
                held += 1
                value = tables.lookup(family, key, shape)
                if value is not None:
                    errors.append(abs(value / seconds - 1))
        if held:
            results.append(FamilyError(family, held, len(errors), statistics.median(errors) if errors else None,
                                       _quantile(errors, 0.9) if errors else None))
    return results


def holdout(tables: OpTables, every: int = 5) -> list[FamilyError]:
    """Every shipped family's held-out error."""
    return [r for f in FAMILIES if (r := holdout_family(tables, f, every)) is not None]
