"""A measured figure from raw samples (standard library only).

in:  samples from :mod:`profiler.timing` and the roofline the chip cannot beat
out: a :class:`placer.profiles.Measurement` with its median, extremes and spread
     (:func:`measurement`); the roofline rule itself (:func:`~placer.profiles.check_roofline`)
     and the record format live in :mod:`placer.profiles`, which the planner reads.

No pydantic here: the GPU-side runner (:mod:`profiler.run`) uses only torch, triton
and the standard library.
"""

from __future__ import annotations

from placer.profiles import Measurement
from profiler.timing import summarize


def measurement(dimension: str, name: str, unit: str, samples: list[float], roofline: float | None,
                roofline_source: str = "", params: dict | None = None) -> Measurement:
    """``samples`` of one figure (in ``unit``) with their median and spread, against ``roofline``."""
    stats = summarize(samples)
    return Measurement(dimension=dimension, name=name, unit=unit, samples=samples, median=stats.median,
                       min=stats.min, max=stats.max, spread_rel=stats.spread_rel, stdev_rel=stats.stdev_rel,
                       roofline=roofline, roofline_source=roofline_source, params=params or {})
