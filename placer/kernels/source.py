"""Where AIConfigurator's measured database keeps each op family, and reading its tables.

in:  the database directory (``aiconfigurator_core/systems/data``: ``<system>/<op>/<backend>/<version>/
     <table>.parquet``, or ``<table>.csv`` samples of its rows in the same layout for tests), a
     system, an engine and optionally its version
out: :func:`engine_versions`, :func:`family_sources` (family → (version, table path)) and
     :func:`read_rows` (rows as dicts; for parquet, pyarrow is imported lazily — it lives only in
     the ``.venv-kernels`` that ``tools/kernel_db_venv.sh`` builds, never in the planner's venv).

Version rule: the engine's version is the newest that measured GEMMs (the table every forward
needs); each other family is read at that same version where measured, else at the newest
version not after it, else at the oldest measured after it — the version used is recorded
per family in ``provenance.json``. NCCL's rows are the system's newest NCCL version.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from placer.errors import PlacerError
from placer.readers import read_text
from placer.kernels.tables import _version_key

#: family → (op directory, table file stem); "" backend means the engine's own directory
SOURCES: dict[str, tuple[str, str]] = {
    "gemm": ("gemm", "gemm_perf"),
    "context_attention": ("attention", "context_attention_perf"),
    "generation_attention": ("attention", "generation_attention_perf"),
    "context_mla": ("mla", "context_mla_perf"),
    "generation_mla": ("mla", "generation_mla_perf"),
    "moe": ("moe", "moe_perf"),
    "allreduce": ("comm", "custom_allreduce_perf"),
    "moe_a2a": ("comm", "moe_a2a_perf"),
    "nccl": ("comm", "nccl_perf"),
}
VENV_SCRIPT = "tools/kernel_db_venv.sh"


class MissingDependencyError(PlacerError):
    """pyarrow (the parquet reader) is not installed in this Python."""


def _versions(db: Path, system: str, op: str, backend: str, stem: str) -> list[str]:
    base = db / system / op / backend
    if not base.is_dir():
        return []
    found = [p.name for p in base.iterdir() if _table(p, stem) is not None]
    return sorted(found, key=_version_key)


def _table(directory: Path, stem: str) -> Path | None:
    """The table file: the database's parquet, or a CSV of its rows (the tests' samples)."""
    for suffix in (".parquet", ".csv"):
        if (directory / f"{stem}{suffix}").is_file():
            return directory / f"{stem}{suffix}"
    return None


def engine_versions(db: Path, system: str, engine: str) -> list[str]:
    """The versions of ``engine`` whose GEMMs ``system`` measured, oldest first."""
    return _versions(db, system, "gemm", engine, "gemm_perf")


def _pick(versions: list[str], wanted: str) -> str | None:
    if not versions:
        return None
    if wanted in versions:
        return wanted
    before = [v for v in versions if _version_key(v) <= _version_key(wanted)]
    return before[-1] if before else versions[0]


def family_sources(db: Path, system: str, engine: str, version: str) -> dict[str, tuple[str, Path]]:
    """family → (version read, parquet path) for every family the database has for this engine."""
    out: dict[str, tuple[str, Path]] = {}
    for family, (op, stem) in SOURCES.items():
        backend = "nccl" if family == "nccl" else engine
        versions = _versions(db, system, op, backend, stem)
        chosen = versions[-1] if (family == "nccl" and versions) else _pick(versions, version)
        if chosen is not None:
            out[family] = (chosen, _table(db / system / op / backend / chosen, stem))
    return out


def read_rows(path: Path) -> list[dict]:
    """Every row of one table as a dict: a CSV (standard library) or a parquet file (pyarrow)."""
    if path.suffix == ".csv":
        text = read_text(path, "kernel database table")  # the gate: size-bounded, UTF-8, a named error
        return list(csv.DictReader(io.StringIO(text, newline="")))
    return read_parquet_rows(path)


def read_parquet_rows(path: Path) -> list[dict]:
    """Every row of one parquet table as a dict (pyarrow needed: see :data:`VENV_SCRIPT`)."""
    try:
        import pyarrow.parquet as pq  # lazily: only the table importer needs it
    except ImportError as exc:
        raise MissingDependencyError(
            f"reading the kernel database needs pyarrow, which this Python lacks ({exc.name}); build the "
            f"importer's venv with `{VENV_SCRIPT}`, then run `tools/import_kernels.sh` (or "
            f"`.venv-kernels/bin/python -m placer.kernels.importer --db DIR --system S --engine E`)") from None
    return pq.read_table(path).to_pylist()
