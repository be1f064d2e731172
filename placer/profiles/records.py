"""Profile records and reading them: what the planner takes from a measured chip.

in:  the plain dicts :func:`profiler.run.profile_chip` and :func:`profiler.link.probe`
     return, or a JSON file written earlier (by this machine or the GPU-side runner);
     for the planner, a profile file, a directory of them, or ``"latest"``
out: frozen pydantic records :class:`ChipProfile` and :class:`LinkProfile` with
     provenance (who, where, when, with what software), raw samples, medians and
     spreads, and efficiency = measured / roofline per dimension; and
     :func:`measured_from` → ``{chip: {"compute_efficiency": …, "mem_bw_efficiency": …,
     "interconnect_efficiency": …, "profile": "<provenance>"}}``, the ``measured``
     mapping :func:`placer.problem.resolve` takes, with only the fields that were
     measured (every other field and chip keeps its catalog default, the roofline
     fallback), plus ``"tables"``: the measured latency tables
     (:class:`~placer.profiles.tables.MeasuredTable`) of the chip, from a profile JSON
     (schema 2) or a CSV (:mod:`placer.profiles.table_io`).

A record is never built around a figure faster than its roofline: loading one
raises :class:`~placer.profiles.figures.RooflineExceededError` (not a validation
error: it is a benchmark bug to report, not a bad input to fix). A file that is not
a valid record is an :class:`~placer.errors.InputError` naming the file and field; files
are read through :mod:`placer.readers` (UTF-8, 64 MiB, 64 levels, no NaN). An efficiency
(measured / roofline) below :data:`MIN_EFFICIENCY` is refused: the same check holds for a
profile stored through the API, which validates this model.

``"latest"`` (the newest stored profile per chip) lives in the service's database,
which this layer never touches: the caller passes the loader (``latest=``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from placer.errors import InputError
from placer.readers import load_mapping
from placer.profiles.figures import (
    Measurement,
    RooflineExceededError,
    Rooflines,
    check_roofline,
)
from placer.profiles.table_io import TableRecord, read_csv_tables
from placer.profiles.tables import MeasuredTable

LATEST = "latest"
#: Chip profiles: 1 = figures only; 2 adds the optional ``tables`` (measured latency
#: grids). Version 1 files still load; a file that carries tables says 2.
CHIP_SCHEMA_VERSION = 2
#: Reads the newest stored profile per chip: ``loader(chips)`` (None: every chip) →
#: the ``measured`` mapping.
LatestLoader = Callable[[set[str] | None], dict[str, dict]]


class _Frozen(BaseModel):
    # defer_build: the validators are built when a profile is first read, not when
    # `placer optimize` imports this module.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


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


class Summary(_Frozen):
    compute_flop_per_s: dict[str, float] = Field(default_factory=dict, description="best sustained per dtype")
    mem_bw_bytes_per_s: float | None = None
    mem_capacity_bytes: float | None = None
    host_to_device_bytes_per_s: float | None = None
    device_to_host_bytes_per_s: float | None = None
    device_to_device_bytes_per_s: float | None = None
    allreduce_bus_bytes_per_s: float | None = None
    loopback_bytes_per_s: float | None = None


_EFF = {"default": None}
#: Smallest efficiency (measured / roofline) a profile may carry. Below 0.1 % of the roofline
#: a figure is a failed run or a wrong unit, not a chip; planning on it divides the chip's
#: peaks by ~0 (an efficiency of 1e-300 made every solve of its chip fail).
MIN_EFFICIENCY = 1e-3


class Efficiency(_Frozen):
    """measured / roofline per dimension; None where the dimension was not measured."""

    compute_efficiency: float | None = Field(**_EFF, description="best bf16 matmul / bf16 peak")
    mem_bw_efficiency: float | None = Field(**_EFF, description="best copy or triad / memory bandwidth")
    interconnect_efficiency: float | None = Field(**_EFF, description="all-reduce bus bandwidth / scale-up, "
                                                                       "one direction (several GPUs only)")
    mem_capacity_fraction: float | None = Field(**_EFF, description="usable / datasheet capacity")
    compute_by_dtype: dict[str, float] = Field(default_factory=dict)

    @field_validator("compute_efficiency", "mem_bw_efficiency", "interconnect_efficiency", "mem_capacity_fraction")
    @classmethod
    def _physical(cls, value: float | None) -> float | None:
        if value is not None:
            _check_efficiency(value)
        return value

    @field_validator("compute_by_dtype")
    @classmethod
    def _physical_by_dtype(cls, values: dict[str, float]) -> dict[str, float]:
        for value in values.values():
            _check_efficiency(value)
        return values

    @model_validator(mode="after")
    def _at_most_one(self) -> Efficiency:
        values = {k: getattr(self, k) for k in ("compute_efficiency", "mem_bw_efficiency",
                                                "interconnect_efficiency", "mem_capacity_fraction")}
        values.update({f"compute_by_dtype[{k}]": v for k, v in self.compute_by_dtype.items()})
        for key, value in values.items():
            if value is not None and value > 1.0:
                raise RooflineExceededError(f"efficiency {key}", value, 1.0, "measured / roofline")
        return self


def _check_efficiency(value: float) -> None:
    if not (math.isfinite(value) and value >= MIN_EFFICIENCY):
        raise ValueError(f"must be finite and at least {MIN_EFFICIENCY:g} (a figure under 0.1 % of the roofline "
                         f"is a failed run or a wrong unit), got {value!r}")


def _check_stored(i: int, m: Measurement) -> None:
    """What a stored figure must hold beyond its types (the runner computes these itself)."""
    where = f"measurements[{i}]"
    if not m.samples:
        raise ValueError(f"{where}.samples: at least one sample is needed")
    numbers = [*m.samples, m.median, m.min, m.max, m.spread_rel, m.stdev_rel]
    if m.roofline is not None:
        numbers.append(m.roofline)
    if not all(math.isfinite(v) for v in numbers):
        raise ValueError(f"{where}: samples and statistics must be finite numbers")
    if not m.median > 0:
        raise ValueError(f"{where}.median must be > 0, got {m.median}")
    for name in ("spread_rel", "stdev_rel"):
        if not getattr(m, name) >= 0:
            raise ValueError(f"{where}.{name} must be >= 0, got {getattr(m, name)}")
    check_roofline(m)


class ChipProfile(_Frozen):
    """A measured chip: provenance, raw samples, figures and efficiencies."""

    schema_version: Literal[1, 2] = CHIP_SCHEMA_VERSION
    kind: Literal["chip"] = "chip"
    chip: str = Field(description="catalog chip name the figures calibrate (or 'cpu')")
    quick: bool = False
    provenance: Provenance
    rooflines: Rooflines
    measurements: list[Measurement] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)
    efficiency: Efficiency = Field(default_factory=Efficiency)
    tables: list[TableRecord] = Field(default_factory=list, description="measured prefill / decode latency "
                                      "grids per (chip, tp, model, dtypes); schema_version 2")
    skipped: list[str] = Field(default_factory=list, description="what was not measured, and why")
    roofline_violations: list[str] = Field(default_factory=list)
    duration_s: float = 0.0

    @field_validator("measurements")
    @classmethod
    def _figures_hold(cls, measurements: list[Measurement]) -> list[Measurement]:
        for i, m in enumerate(measurements):
            _check_stored(i, m)
        return measurements

    @model_validator(mode="after")
    def _something_measured(self) -> ChipProfile:
        if not self.measurements and not self.tables:
            raise ValueError("a chip profile needs at least one measurement or one table")
        if self.tables and self.schema_version < 2:
            raise ValueError("tables need schema_version 2")
        return self

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
        tables = [t.table(where or "") for t in self.tables]
        return {**fields, **({"tables": tables} if tables else {}), "profile": self.label(where)}

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

    schema_version: Literal[1] = 1
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
    return load_mapping(path, "profile", kind="json")


def load_chip_profile(path: Path) -> ChipProfile:
    """One chip profile file; an InputError naming the file and the first bad field."""
    try:
        return ChipProfile.load(path)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"profile {str(path)!r}: {where}: {first['msg']}") from None


def _csv_files(source: str | Path) -> list[Path]:
    path = Path(source)
    if path.is_file():
        return [path] if path.suffix.lower() == ".csv" else []
    return sorted(path.glob("*.csv")) if path.is_dir() else []


def read_chip_profiles(source: str | Path) -> list[tuple[ChipProfile, Path]]:
    """Every chip profile a file or a directory holds (other JSON in a directory is skipped;
    a CSV of measured tables is read by :func:`read_tables`)."""
    path = Path(source)
    if path.is_file():
        return [] if path.suffix.lower() == ".csv" else [(load_chip_profile(path), path)]
    if path.is_dir():
        out = []
        for file in sorted(path.glob("*.json")):
            try:
                kind = _read_json(file).get("kind")
            except InputError:  # not a profile (other JSON, or not readable as one): skipped, as documented
                continue
            if kind == "chip":
                out.append((load_chip_profile(file), file))
        return out
    raise InputError(f"--profiles: {str(source)!r} is neither a profile file (JSON or CSV), a directory "
                     f"of them, nor {LATEST!r}")


def read_tables(source: str | Path) -> list[MeasuredTable]:
    """The measured tables of the CSV files at ``source`` (a file or a directory)."""
    return [table for file in _csv_files(source) for table in read_csv_tables(file)]


def newest_per_chip(profiles: Iterable[tuple[ChipProfile, Path]]) -> dict[str, tuple[ChipProfile, Path]]:
    best: dict[str, tuple[ChipProfile, Path]] = {}
    for profile, path in profiles:
        held = best.get(profile.chip)
        if held is None or profile.provenance.measured_at > held[0].provenance.measured_at:
            best[profile.chip] = (profile, path)
    return best


def measured_from(source: str | Path, chips: Iterable[str] | None = None,
                  latest: LatestLoader | None = None) -> dict[str, dict]:
    """The measured efficiencies per chip from ``source`` (a file, a directory or ``"latest"``).

    ``chips`` restricts the answer to those chips; ``latest`` reads the stored
    profiles when ``source`` is ``"latest"``. Chips whose profile measured none of
    the three efficiencies are left out.
    """
    wanted = set(chips) if chips is not None else None
    if str(source) == LATEST:
        if latest is None:
            raise InputError(f"--profiles {LATEST}: no profile database to read here; "
                             "pass a profile file or directory")
        return latest(wanted)
    out: dict[str, dict] = {}
    for chip, (profile, path) in newest_per_chip(read_chip_profiles(source)).items():
        if wanted is not None and chip not in wanted:
            continue
        fields = profile.measured_fields(where=path.name)
        if len(fields) > 1:  # more than the provenance alone
            out[chip] = fields
    for table in read_tables(source):
        if wanted is not None and table.key.chip not in wanted:
            continue
        fields = out.setdefault(table.key.chip, {"profile": table.profile})
        fields["tables"] = [*fields.get("tables", []), table]
    return out


def measured_from_all(sources: Iterable[str | Path], chips: Iterable[str] | None = None,
                      latest: LatestLoader | None = None) -> dict[str, dict]:
    """:func:`measured_from` over several sources: efficiencies of a later source win,
    tables add up (a later table for the same key replaces an earlier one in the model)."""
    out: dict[str, dict] = {}
    for source in sources:
        for chip, fields in measured_from(source, chips, latest).items():
            held = out.get(chip, {})
            tables = [*held.get("tables", []), *fields.get("tables", [])]
            profile = "; ".join(dict.fromkeys(p for p in (held.get("profile"), fields.get("profile")) if p))
            out[chip] = {**held, **fields, **({"tables": tables} if tables else {}), "profile": profile}
    return out
