"""AIConfigurator's measured kernel database → placer's own compact per-op tables, with provenance.

in:  raw rows (dicts: from the database's parquet through :func:`placer.kernels.source.read_parquet_rows`,
     or from CSV in tests) for one (system, engine, version)
out: ``<out>/<system>/<engine>-<version>/<family>.csv[.gz]`` (the columns of
     :data:`placer.kernels.tables.FAMILIES`, latency in seconds) and ``provenance.json``
     (source, licence, versions per family, rows read / kept / dropped and why).

The rules, each the same for every family:

* **One kernel per key.** Where the database timed several kernels for the same op (vLLM's
  Cutlass / DeepGEMM / FlashInfer block-FP8 GEMMs; allreduce implementations), each key
  (dtype, layout, GPU count, …) takes the kernel that the database measured over the most
  shapes — the engine's default path, measured across the grid — and, at a shape that kernel
  lacks, the next one in that order. Ties: the faster median.
* **Repeated measurements → their median.**
* **Faster than the datasheet → dropped and counted** (:func:`placer.kernels.normalise.floor_s`:
  peak FLOP/s of the dtype, HBM bytes at the datasheet bandwidth, scale-up bytes): such a row
  timed the L2 cache or a skipped kernel, not what a served model sees.
* **Thinning** (``--thin``): GEMM rows at m = 16j + 1 (j ≥ 2) — the database times each tile
  boundary on both sides — may be left out; the held-out check says what it costs
  (``bench/bench_kernel_holdout.py``). Off by default.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gzip
import io
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from placer.catalog import Chip, chip_catalog
from placer.errors import InputError
from placer.kernels import normalise as norm
from placer.kernels.source import engine_versions, family_sources, read_rows
from placer.kernels import tables
from placer.kernels.tables import CHIP_SYSTEMS, DATA_DIR, ENGINES, FAMILIES

SOURCE_PACKAGE = "aiconfigurator-core==0.12.0"
SOURCE_URL = "https://github.com/ai-dynamo/aiconfigurator"
LICENCE = "Apache-2.0"
GZIP_OVER_BYTES = 16 * 1024


def chip_for_system(system: str) -> Chip | None:
    """The catalog chip a database system was measured on (its datasheet gives the floors)."""
    name = next((c for c, s in CHIP_SYSTEMS.items() if s == system), None)
    return chip_catalog().get(name) if name else None


def _thin_out(record: norm.Record) -> bool:
    m = record.axes[-1]
    return m > 32 and m % 16 == 1


def compact(family: str, rows, chip: Chip | None, thin: bool = False) -> tuple[list[norm.Record], dict]:
    """The family's kept records (one per shape, seconds) and the counts for provenance."""
    skipped: Counter = Counter()
    by_key: dict[tuple, dict[str, dict[tuple, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    n_read = 0
    for row in rows:
        n_read += 1
        try:
            rec = norm.normalise(family, row)
        except KeyError as exc:
            raise ValueError(f"a {family} row lacks the column {exc} (columns: {', '.join(row)})") from None
        if isinstance(rec, str):
            skipped[rec] += 1
            continue
        by_key[rec.key][rec.kernel].setdefault(rec.axes, []).append(rec.seconds)
    kept: list[norm.Record] = []
    dropped: Counter = Counter()
    kernels: Counter = Counter()
    duplicates = 0
    for key, per_kernel in by_key.items():
        order = sorted(per_kernel, key=lambda k: (-len(per_kernel[k]),
                                                  statistics.median(min(v) for v in per_kernel[k].values())))
        shapes: dict[tuple, tuple[str, list[float]]] = {}
        for kernel in order:
            for axes, times in per_kernel[kernel].items():
                shapes.setdefault(axes, (kernel, times))
        for axes, (kernel, times) in shapes.items():
            duplicates += len(times) - 1
            rec = norm.Record(key, axes, statistics.median(times), kernel)
            if thin and family == "gemm" and _thin_out(rec):
                dropped["thinned (m = 16j + 1)"] += 1
                continue
            floor = norm.floor_s(family, rec, chip)
            if floor is not None and rec.seconds < floor[0]:
                dropped[f"faster than {floor[1]} at the datasheet peak"] += 1
                continue
            kernels[kernel] += 1
            kept.append(rec)
    kept.sort(key=lambda r: (tuple(str(k) for k in r.key), r.axes))
    counts = {"rows_read": n_read, "rows_kept": len(kept), "repeats_merged": duplicates,
              "skipped": dict(skipped), "dropped": dict(dropped), "kernels": dict(kernels)}
    return kept, counts


def _fmt(value) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.6g}"
    return str(value)


def write_family(directory: Path, family: str, records: list[norm.Record]) -> Path:
    """``<family>.csv``, gzipped (``.csv.gz``, reproducible bytes) when over :data:`GZIP_OVER_BYTES`."""
    fam = FAMILIES[family]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*fam.keys, *fam.axes, "latency_s"])
    for r in records:
        writer.writerow([*map(_fmt, r.key), *map(_fmt, r.axes), f"{r.seconds:.4g}"])
    data = buf.getvalue().encode()
    for stale in (directory / f"{family}.csv", directory / f"{family}.csv.gz"):
        stale.unlink(missing_ok=True)
    if len(data) > GZIP_OVER_BYTES:
        path = directory / f"{family}.csv.gz"
        path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    else:
        path = directory / f"{family}.csv"
        path.write_bytes(data)
    return path


def import_tables(db: Path, system: str, engine: str, version: str | None = None, out: Path = DATA_DIR,
                  thin: bool = False, reader=read_rows, today: str | None = None) -> dict:
    """Import one (system, engine, version) from the database at ``db``; returns the provenance written.

    InputError naming the value when the database has no such system, engine or version."""
    if not db.is_dir():
        raise InputError(f"--db: {str(db)!r} is not a directory (the database's aiconfigurator_core/systems/data)")
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    versions = engine_versions(db, system, engine)
    if not versions:
        raise InputError(f"the kernel database at {db} has no GEMM tables for system {system!r} and engine "
                         f"{engine!r}")
    version = version or versions[-1]
    if version not in versions:
        raise InputError(f"version {version!r} of {engine} is not measured on {system}; measured: "
                         f"{', '.join(versions)}")
    chip = chip_for_system(system)
    directory = out / system / f"{engine}-{version}"
    directory.mkdir(parents=True, exist_ok=True)
    families = {}
    for family, (fam_version, path) in family_sources(db, system, engine, version).items():
        records, counts = compact(family, reader(path), chip, thin=thin)
        if not records:
            continue
        written = write_family(directory, family, records)
        families[family] = {"file": written.name, "source_version": fam_version,
                            "source_table": str(path.relative_to(db)), **counts}
    provenance = {
        "source": SOURCE_PACKAGE, "url": SOURCE_URL, "licence": LICENCE,
        "system": system, "chip": chip.name if chip else None, "engine": engine, "version": version,
        "imported": today or dt.date.today().isoformat(), "thinned": thin, "latency_unit": "s",
        "families": families,
    }
    (directory / "provenance.json").write_text(json.dumps(provenance, indent=1, sort_keys=True) + "\n")
    tables.forget()  # this process reads the new tables, not what it cached before
    return provenance


def main(argv: list[str] | None = None) -> int:
    """``python -m placer.kernels.importer --db DIR --system S --engine E [--version V] [--out DIR]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True, help="aiconfigurator_core/systems/data")
    ap.add_argument("--system", required=True)
    ap.add_argument("--engine", required=True, choices=ENGINES)
    ap.add_argument("--version")
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    ap.add_argument("--thin", action="store_true", help="leave out GEMM rows at m = 16j + 1 (j >= 2)")
    args = ap.parse_args(argv)
    try:
        prov = import_tables(args.db, args.system, args.engine, args.version, args.out, thin=args.thin)
    except Exception as exc:  # one line, no traceback (the CLI's rule)
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2 if isinstance(exc, ValueError) else 1)
    kept = sum(f["rows_kept"] for f in prov["families"].values())
    print(f"{args.system} {args.engine}-{prov['version']}: {kept} rows in {len(prov['families'])} families")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
