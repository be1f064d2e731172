"""Validated profile records: :class:`ChipProfile` and :class:`LinkProfile`, JSON in and out.

in:  the plain dicts :func:`profiler.run.profile_chip` and :func:`profiler.link.probe`
     return, or a JSON file written earlier (by this machine or the GPU-side runner)
out: frozen pydantic models with provenance (who, where, when, with what software),
     raw samples, medians and spreads, and efficiency = measured / roofline per
     dimension; :meth:`ChipProfile.measured_fields` is what
     :func:`placer.problem.resolve` takes for one chip.

A record is never built around a figure faster than its roofline: loading one
raises :class:`~profiler.measure.RooflineExceededError` (not a validation error:
it is a benchmark bug to report, not a bad input to fix).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from placer.errors import InputError
from profiler.measure import DIMENSIONS, UNITS, RooflineExceededError, check_roofline

SCHEMA_VERSION = 1
Dimension = Literal[DIMENSIONS]  # type: ignore[valid-type]
Unit = Literal[UNITS]  # type: ignore[valid-type]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Measurement(_Frozen):
    """One figure measured several times."""

    dimension: Dimension = Field(description="compute, memory_bandwidth, memory_capacity or interconnect")
    name: str = Field(description="what ran, e.g. 'matmul bf16 8192x8192x8192', 'copy triton', 'h2d pinned'")
    unit: Unit = Field(description="flop_per_s, bytes_per_s or bytes")
    samples: list[float] = Field(min_length=1, description="one figure per timed repetition (raw)")
    median: float = Field(gt=0)
    min: float
    max: float
    spread_rel: float = Field(ge=0, description="(max - min) / median")
    stdev_rel: float = Field(ge=0, description="sample standard deviation / median")
    roofline: float | None = Field(default=None, description="the bound in `unit`; None: none known")
    roofline_source: str = ""
    params: dict = Field(default_factory=dict, description="shape, dtype, bytes, repetitions, …")

    @model_validator(mode="after")
    def _below_roofline(self) -> Measurement:
        check_roofline(self.model_dump())
        return self

    @property
    def fraction_of_roofline(self) -> float | None:
        return self.median / self.roofline if self.roofline else None


class Provenance(_Frozen):
    host: str
    measured_by: str = Field(description="user@host that ran the profile")
    measured_at: datetime = Field(description="UTC time the profile was taken")
    device: str = Field(description="torch device string, e.g. cuda:0")
    device_model: str = Field(description="e.g. 'NVIDIA H200' or the CPU model name")
    driver: str = Field(description="GPU driver version (nvidia-smi), or the OS kernel on the CPU")
    cuda_runtime: str | None = None
    torch_version: str
    triton_version: str = ""
    python_version: str = ""
    profiler_commit: str = ""
    command: str = ""


class Rooflines(_Frozen):
    source: str
    datasheet: bool = Field(description="True: catalog datasheet peaks; False: an estimate (CPU)")
    flop_per_s: dict[str, float] = Field(default_factory=dict)
    mem_bw_bytes_per_s: float | None = None
    mem_capacity_bytes: float | None = None
    host_link_bytes_per_s: float | None = None
    scaleup_bytes_per_s: float | None = None
    notes: list[str] = Field(default_factory=list)


class Summary(_Frozen):
    compute_flop_per_s: dict[str, float] = Field(default_factory=dict, description="best sustained per dtype")
    mem_bw_bytes_per_s: float | None = None
    mem_capacity_bytes: float | None = None
    host_to_device_bytes_per_s: float | None = None
    device_to_host_bytes_per_s: float | None = None
    device_to_device_bytes_per_s: float | None = None
    allreduce_bus_bytes_per_s: float | None = None
    loopback_bytes_per_s: float | None = None


_EFF = {"default": None, "ge": 0}


class Efficiency(_Frozen):
    """measured / roofline per dimension; None where the dimension was not measured."""

    compute_efficiency: float | None = Field(**_EFF, description="best bf16 matmul / bf16 peak")
    mem_bw_efficiency: float | None = Field(**_EFF, description="best copy or triad / memory bandwidth")
    interconnect_efficiency: float | None = Field(**_EFF, description="all-reduce bus bandwidth / scale-up, "
                                                                       "one direction (several GPUs only)")
    mem_capacity_fraction: float | None = Field(**_EFF, description="usable / datasheet capacity")
    compute_by_dtype: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _at_most_one(self) -> Efficiency:
        values = {k: getattr(self, k) for k in ("compute_efficiency", "mem_bw_efficiency",
                                                "interconnect_efficiency", "mem_capacity_fraction")}
        values.update({f"compute_by_dtype[{k}]": v for k, v in self.compute_by_dtype.items()})
        for key, value in values.items():
            if value is not None and value > 1.0:
                raise RooflineExceededError(f"efficiency {key}", value, 1.0, "measured / roofline")
        return self


class ChipProfile(_Frozen):
    """A measured chip: provenance, raw samples, figures and efficiencies."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["chip"] = "chip"
    chip: str = Field(description="catalog chip name the figures calibrate (or 'cpu')")
    quick: bool = False
    provenance: Provenance
    rooflines: Rooflines
    measurements: list[Measurement] = Field(min_length=1)
    summary: Summary
    efficiency: Efficiency
    skipped: list[str] = Field(default_factory=list, description="what was not measured, and why")
    roofline_violations: list[str] = Field(default_factory=list)
    duration_s: float = 0.0

    @model_validator(mode="after")
    def _no_violations(self) -> ChipProfile:
        if self.roofline_violations:
            raise RooflineExceededError(f"profile of {self.chip}: the runner recorded "
                                        f"{len(self.roofline_violations)} violation(s): {self.roofline_violations[0]}")
        return self

    def label(self, where: str | None = None) -> str:
        """Short provenance for plans: what measured this, when, with what."""
        p = self.provenance
        src = f"{where}; " if where else ""
        return (f"profile {src}{p.device_model} on {p.host}, {p.measured_at:%Y-%m-%d %H:%M}Z, "
                f"torch {p.torch_version}" + (f", triton {p.triton_version}" if p.triton_version else ""))

    def measured_fields(self, where: str | None = None) -> dict:
        """The Chip fields this profile measured, plus ``profile`` provenance (for ``resolve``)."""
        eff = self.efficiency
        fields = {k: getattr(eff, k) for k in ("compute_efficiency", "mem_bw_efficiency", "interconnect_efficiency")
                  if getattr(eff, k) is not None}
        return {**fields, "profile": self.label(where)}

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> ChipProfile:
        return cls.model_validate(_read_json(path))


class LinkProfile(_Frozen):
    """A probed TCP path: bandwidth over parallel streams, RTT, with provenance."""

    schema_version: Literal[1] = SCHEMA_VERSION
    kind: Literal["link"] = "link"
    peer: str = Field(description="HOST:PORT probed")
    host: str = Field(description="the probing host")
    measured_at: datetime
    streams: int = Field(ge=1)
    seconds: float = Field(gt=0)
    shaped_gbit_per_s: float | None = Field(default=None, description="token-bucket rate the sender kept to")
    bytes: int = Field(ge=0)
    link_gbit_per_s: float = Field(ge=0, description="aggregate, measured at the receiver")
    per_stream_gbit_per_s: list[float]
    rtt_ms: float = Field(ge=0, description="median round trip of small messages")
    jitter_ms: float = Field(ge=0, description="p90 - p10 of the round trips")
    rtt_samples_ms: list[float]
    python_version: str = ""

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def _read_json(path: str | Path) -> dict:
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise InputError(f"profile: cannot read {str(path)!r}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"profile: {str(path)!r} is not JSON: {e}") from None
