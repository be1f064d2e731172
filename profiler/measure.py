"""Plain measurement records and the roofline check (standard library only).

in:  samples from :mod:`profiler.timing` and the roofline the chip cannot beat
out: :class:`Measurement` (plain data, JSON-ready with ``as_dict``) and
     :func:`check_roofline`, which raises :class:`RooflineExceededError` when any
     sample is faster than the roofline: such a figure is a bug in the benchmark
     (wrong byte or FLOP count, a cache hit, a lazy kernel), never a fast chip.

No pydantic here: the GPU-side runner (:mod:`profiler.run`) uses only torch, triton
and the standard library; :mod:`profiler.record` validates the same dicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from placer.errors import PlacerError
from profiler.timing import summarize

DIMENSIONS = ("compute", "memory_bandwidth", "memory_capacity", "interconnect")
UNITS = ("flop_per_s", "bytes_per_s", "bytes")


class RooflineExceededError(PlacerError):
    """A measured figure is above the chip's roofline: a bug to report, not a result."""

    exit_code = 1
    http_status = 422

    def __init__(self, what: str, value: float | None = None, roofline: float | None = None, source: str = ""):
        self.what, self.value, self.roofline, self.source = what, value, roofline, source
        if value is None or roofline is None:
            detail = what
        else:
            detail = f"{what}: measured {value:.4g} is above the roofline {roofline:.4g} ({source or 'roofline'})"
        super().__init__(f"{detail}; a figure faster than the hardware is a benchmark bug, not accepted")


@dataclass
class Measurement:
    """One figure measured several times: a rate (or a size) with its samples."""

    dimension: str  # one of DIMENSIONS
    name: str  # e.g. "matmul bf16 8192x8192x8192", "copy triton", "h2d pinned"
    unit: str  # one of UNITS
    samples: list[float]
    roofline: float | None  # what the hardware cannot beat, in ``unit``; None: no bound known
    roofline_source: str = ""
    params: dict = field(default_factory=dict)
    median: float = 0.0
    min: float = 0.0
    max: float = 0.0
    spread_rel: float = 0.0
    stdev_rel: float = 0.0

    def __post_init__(self) -> None:
        if self.dimension not in DIMENSIONS:
            raise ValueError(f"dimension must be one of {DIMENSIONS}, got {self.dimension!r}")
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")
        stats = summarize(self.samples)
        self.median, self.min, self.max = stats.median, stats.min, stats.max
        self.spread_rel, self.stdev_rel = stats.spread_rel, stats.stdev_rel

    @property
    def fraction_of_roofline(self) -> float | None:
        return self.median / self.roofline if self.roofline else None

    def as_dict(self) -> dict:
        return asdict(self)


def check_roofline(m: Measurement | dict) -> None:
    """Raise :class:`RooflineExceededError` if any sample of ``m`` beats its roofline."""
    get = m.get if isinstance(m, dict) else lambda k: getattr(m, k)
    roofline, samples = get("roofline"), get("samples") or []
    if not roofline or not samples:
        return
    fastest = max(samples)
    if fastest > roofline:
        raise RooflineExceededError(f"{get('dimension')} / {get('name')}", fastest, roofline,
                                    get("roofline_source") or "roofline")
