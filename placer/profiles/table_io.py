"""Reading measured tables: the documented CSV, and the ``tables`` of a profile JSON.

in:  a CSV file, one row per measurement (docs/profiles.md), or the ``tables`` list of a
     chip profile that ``placer profile model`` wrote
out: :class:`~placer.profiles.tables.MeasuredTable` per (chip, tp, model, weight dtype,
     KV dtype), and :class:`TableRecord`, the pydantic form a profile JSON stores.

CSV columns (header required; lines starting with ``#`` and blank lines are skipped; one
line per row, no quoted line breaks)::

    chip,tp,model,weight_dtype,kv_dtype,phase,tokens,batch,context_tokens,seconds,source

``phase`` is ``prefill`` (``tokens``: new tokens in ONE forward, ``context_tokens``: cached
tokens before it; ``batch`` empty) or ``decode`` (``batch``: sequences in one step,
``context_tokens``: context tokens of each; ``tokens`` empty); ``seconds``: the measured
latency (a median); ``source``: who measured it, when, with which engine on which device.
Each phase of each key must fill a full grid (every size × every context). A bad cell is
an :class:`~placer.errors.InputError` naming the file, the line and the column.

The file is read through :mod:`placer.readers` (UTF-8 only, at most 64 MiB); every number is
finite and bounded (sizes and contexts at most ``placer.fields.MAX_TOKENS``, a latency at most
``MAX_SECONDS``, tp at most ``MAX_TP``), and a grid larger than
:data:`~placer.profiles.tables.MAX_GRID_POINTS` is refused before it is built.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from placer.errors import InputError
from placer.fields import MAX_SECONDS, MAX_TOKENS, real
from placer.readers import read_text
from placer.profiles.tables import DECODE, PHASES, PREFILL, SIZE_AXIS, Grid, MeasuredTable, TableKey, grid_from_points

COLUMNS = ("chip", "tp", "model", "weight_dtype", "kv_dtype", "phase", "tokens", "batch", "context_tokens",
           "seconds", "source")
DTYPES = ("bf16", "fp8")
#: Most chips of one measured instance.
MAX_TP = 1024
_SIZE = real(gt=0, le=MAX_TOKENS)  # new tokens of a forward, or sequences of a step
_CONTEXT = real(ge=0, le=MAX_TOKENS)
_SECONDS = real(gt=0, le=MAX_SECONDS)


class GridRecord(BaseModel):
    """One phase's grid as stored in JSON: ``seconds[i][j]`` at (``sizes[i]``, ``context_tokens[j]``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    sizes: list[_SIZE] = Field(min_length=1, description="prefill: new tokens per forward; decode: batch")
    context_tokens: list[_CONTEXT] = Field(min_length=1, description="cached (prefill) or per-sequence (decode) "
                                                                     "context tokens")
    seconds: list[list[_SECONDS]] = Field(description="median latency, seconds, [size][context]")
    repeats: int = Field(1, ge=1, description="timed runs behind each median")

    def grid(self) -> Grid:
        return Grid(tuple(self.sizes), tuple(self.context_tokens), tuple(tuple(r) for r in self.seconds))

    @model_validator(mode="after")
    def _valid_grid(self) -> GridRecord:
        self.grid()  # ValueError naming what is wrong
        return self


class TableRecord(BaseModel):
    """A measured table in a profile JSON, with its provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    chip: str
    tp: int = Field(ge=1, le=MAX_TP)
    model: str = Field(description="catalog model name, or the name of the shape measured (llama-tiny-…)")
    weight_dtype: str
    kv_dtype: str
    prefill: GridRecord | None = None
    decode: GridRecord | None = None
    measured_by: str = ""
    measured_at: datetime | None = None
    engine: str = Field("", description="what ran the forwards, e.g. 'executor.engine (triton) 0.1'")
    device: str = Field("", description="device model, e.g. 'NVIDIA H200'")
    model_shape: dict = Field(default_factory=dict, description="the exact architecture measured")

    @property
    def key(self) -> TableKey:
        return TableKey(self.chip, self.tp, self.model, self.weight_dtype, self.kv_dtype)

    def source(self) -> str:
        when = f"{self.measured_at:%Y-%m-%d %H:%M}Z" if self.measured_at else ""
        return ", ".join(p for p in (self.engine, self.device, self.measured_by, when) if p)

    def table(self, profile: str = "") -> MeasuredTable:
        return MeasuredTable(self.key, self.prefill.grid() if self.prefill else None,
                             self.decode.grid() if self.decode else None, self.source(), profile)


#: Largest value of each numeric column.
_CEILING = {"tp": MAX_TP, "tokens": MAX_TOKENS, "batch": MAX_TOKENS, "context_tokens": MAX_TOKENS,
            "seconds": MAX_SECONDS}


def _cell(row: dict, column: str, where: str, kind=str, positive: bool = False):
    raw = (row.get(column) or "").strip()
    if not raw:
        raise InputError(f"{where}, column {column}: empty")
    if kind is str:
        return raw
    try:
        value = kind(float(raw)) if kind is int and float(raw).is_integer() else kind(raw)
    except ValueError:
        raise InputError(f"{where}, column {column}: {raw!r} is not a number") from None
    if positive and not (value > 0 and math.isfinite(value)):
        raise InputError(f"{where}, column {column}: must be > 0, got {raw!r}")
    if not positive and not (value >= 0 and math.isfinite(value)):
        raise InputError(f"{where}, column {column}: must be >= 0, got {raw!r}")
    if value > _CEILING[column]:
        raise InputError(f"{where}, column {column}: must be at most {_CEILING[column]:g}, got {raw!r}")
    return value


def _row(row: dict, where: str) -> tuple[TableKey, str, float, float, float, str]:
    key = TableKey(_cell(row, "chip", where), _cell(row, "tp", where, int, True), _cell(row, "model", where),
                   _cell(row, "weight_dtype", where), _cell(row, "kv_dtype", where))
    for column in ("weight_dtype", "kv_dtype"):
        if getattr(key, column) not in DTYPES:
            raise InputError(f"{where}, column {column}: must be one of {', '.join(DTYPES)}, "
                             f"got {getattr(key, column)!r}")
    phase = _cell(row, "phase", where)
    if phase not in PHASES:
        raise InputError(f"{where}, column phase: must be prefill or decode, got {phase!r}")
    size_col = SIZE_AXIS[phase]
    other = SIZE_AXIS[DECODE if phase == PREFILL else PREFILL]
    if (row.get(other) or "").strip():
        raise InputError(f"{where}, column {other}: must be empty for a {phase} row (it uses {size_col})")
    size = _cell(row, size_col, where, float, True)
    context = _cell(row, "context_tokens", where, float)
    seconds = _cell(row, "seconds", where, float, True)
    return key, phase, size, context, seconds, (row.get("source") or "").strip()


def read_csv_tables(path: str | Path) -> list[MeasuredTable]:
    """Every measured table of a CSV file (see the module docstring for the columns)."""
    path = Path(path)
    text = read_text(path, "profile table")
    # (line number, text) of the data lines: comments and blank lines skipped, numbers kept
    numbered = [(i, line) for i, line in enumerate(text.splitlines(), 1)
                if line.strip() and not line.lstrip().startswith("#")]
    header = [c.strip() for c in _cells(numbered[0][1], f"{path}:{numbered[0][0]}")] if numbered else []
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; the header must name "
                         f"{','.join(COLUMNS)}")
    points: dict[tuple[TableKey, str], dict[tuple[float, float], float]] = defaultdict(dict)
    sources: dict[TableKey, list[str]] = defaultdict(list)
    for lineno, line in numbered[1:]:
        where = f"{path}:{lineno}"
        cells = _cells(line, where)
        if len(cells) != len(header):
            raise InputError(f"{where}: {len(cells)} cells, the header has {len(header)}")
        key, phase, size, context, seconds, source = _row(dict(zip(header, cells)), where)
        if (size, context) in points[(key, phase)]:
            raise InputError(f"{where}, column seconds: a second {phase} measurement at "
                             f"{SIZE_AXIS[phase]} {size:g}, context {context:g}")
        points[(key, phase)][(size, context)] = seconds
        if source and source not in sources[key]:
            sources[key].append(source)
    return _tables(points, sources, path)


def _cells(line: str, where: str) -> list[str]:
    """The cells of one CSV line, or InputError naming it (a cell over the csv module's 128 kB, a stray quote)."""
    try:
        return next(csv.reader([line]))
    except csv.Error as err:
        raise InputError(f"{where}: not a CSV row ({err})") from None


def _tables(points: dict, sources: dict, path: Path) -> list[MeasuredTable]:
    grids: dict[TableKey, dict[str, Grid]] = defaultdict(dict)
    for (key, phase), pts in points.items():
        try:
            grids[key][phase] = grid_from_points(pts, f"{path}: {phase} table of {key}")
        except ValueError as e:
            raise InputError(str(e)) from None
    return [MeasuredTable(key, g.get(PREFILL), g.get(DECODE), "; ".join(sources[key]) or path.name, path.name)
            for key, g in grids.items()]
