"""Measured figures and the roofline rule (standard library only).

in:  a figure measured several times (its samples and summary statistics) and the
     bound its chip cannot beat
out: :class:`Measurement` and :class:`Rooflines` (frozen dataclasses, one definition
     for the profiler that measures them and the records that store them), and
     :func:`check_roofline`, which raises :class:`RooflineExceededError` when any
     sample is faster than its roofline: such a figure is a bug in the benchmark
     (wrong byte or FLOP count, a cache hit, a lazy kernel), never a fast chip.

No pydantic here: the GPU-side runner (``python3 -m profiler.run``) builds these with
torch, triton and the standard library alone; :mod:`placer.profiles.records`
validates the same classes when it reads a profile file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal, get_args

from placer.errors import PlacerError

Dimension = Literal["compute", "memory_bandwidth", "memory_capacity", "interconnect"]
Unit = Literal["flop_per_s", "bytes_per_s", "bytes"]
DIMENSIONS: tuple[str, ...] = get_args(Dimension)
UNITS: tuple[str, ...] = get_args(Unit)
#: Version of the profile records (``schema_version`` of a chip or link profile).
SCHEMA_VERSION = 1

# Reading a record: pydantic validates these dataclasses field by field and refuses
# keys they do not have (a plain dict here: no pydantic import at this layer).
_RECORD_CONFIG = {"extra": "forbid"}


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


@dataclass(frozen=True)
class Measurement:
    """One figure measured several times: a rate (or a size) with its samples and their spread.

    ``profiler.measure.measurement`` builds one from raw samples (computing the
    statistics); a record read from a file keeps the statistics it stored.
    """

    __pydantic_config__ = _RECORD_CONFIG

    dimension: Dimension  # compute, memory_bandwidth, memory_capacity or interconnect
    name: str  # what ran, e.g. "matmul bf16 8192x8192x8192", "copy triton", "h2d pinned"
    unit: Unit  # flop_per_s, bytes_per_s or bytes
    samples: list[float]  # one figure per timed repetition (raw)
    median: float
    min: float
    max: float
    spread_rel: float  # (max - min) / median
    stdev_rel: float  # sample standard deviation / median
    roofline: float | None = None  # the bound in ``unit``; None: none known
    roofline_source: str = ""
    params: dict = field(default_factory=dict)  # shape, dtype, bytes, repetitions, …

    def __post_init__(self) -> None:
        if self.dimension not in DIMENSIONS:
            raise ValueError(f"dimension must be one of {DIMENSIONS}, got {self.dimension!r}")
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {self.unit!r}")

    @property
    def fraction_of_roofline(self) -> float | None:
        return self.median / self.roofline if self.roofline else None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Rooflines:
    """Upper bounds per dimension (None: no bound known; the figure is still recorded)."""

    __pydantic_config__ = _RECORD_CONFIG

    source: str
    datasheet: bool  # True: catalog datasheet peaks; False: an estimate (CPU)
    flop_per_s: dict[str, float] = field(default_factory=dict)  # per dtype
    mem_bw_bytes_per_s: float | None = None
    mem_capacity_bytes: float | None = None
    host_link_bytes_per_s: float | None = None
    scaleup_bytes_per_s: float | None = None  # one direction, per chip
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {**asdict(self), "notes": list(self.notes)}


def check_roofline(m: Measurement) -> None:
    """Raise :class:`RooflineExceededError` if any sample of ``m`` beats its roofline."""
    if not m.roofline or not m.samples:
        return
    fastest = max(m.samples)
    if fastest > m.roofline:
        raise RooflineExceededError(f"{m.dimension} / {m.name}", fastest, m.roofline,
                                    m.roofline_source or "roofline")
