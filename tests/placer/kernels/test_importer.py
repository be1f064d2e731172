"""The importer on real rows of the kernel database (tests/data/kernels): units, provenance,
the datasheet floor, repeats, one kernel per key, and the errors a user meets."""

from __future__ import annotations

import csv
import json
import shutil
import sys

import pytest
from typer.testing import CliRunner

from placer.catalog import get_chip
from placer.cli import app
from placer.errors import InputError
from placer.kernels import load
from placer.kernels.importer import import_tables
from placer.kernels.normalise import floor_s, normalise
from placer.kernels.source import MissingDependencyError, read_rows
from placer.kernels.tables import read_rows as read_table_rows

from .conftest import SAMPLE_DB

VERSION = "1.3.0rc20"


def _db_rows(system: str, rel: str) -> list[dict]:
    return read_rows(SAMPLE_DB / system / rel)


def test_latency_becomes_seconds_and_messages_bytes(sample_tables):
    tables = load("h200_sxm", "trtllm", data_dir=sample_tables)
    shipped = {(r["dtype"], r["n"], r["k"], r["m"]): float(r["latency_s"])
               for r in read_table_rows(sample_tables / "h200_sxm" / f"trtllm-{VERSION}" / "gemm.csv")}
    raw = next(r for r in _db_rows("h200_sxm", f"gemm/trtllm/{VERSION}/gemm_perf.csv")
               if r["gemm_dtype"] == "bfloat16" and r["m"] == "64" and r["n"] == "8192")
    assert shipped[("bf16", "8192", raw["k"], "64")] == pytest.approx(float(raw["latency"]) * 1e-3, rel=1e-3)
    ar = next(r for r in _db_rows("h200_sxm", f"comm/trtllm/{VERSION}/custom_allreduce_perf.csv")
              if r["num_gpus"] == "8" and r["message_size"] == "1048576")
    # the database's message size counts bf16 elements: 2 bytes each
    assert tables.allreduce_s("bf16", 8, 2 * 1048576) == pytest.approx(float(ar["latency"]) * 1e-3, rel=1e-3)


def test_provenance_names_source_licence_and_counts(sample_tables):
    prov = json.loads((sample_tables / "h200_sxm" / f"trtllm-{VERSION}" / "provenance.json").read_text())
    assert prov["source"] == "aiconfigurator-core==0.12.0"
    assert prov["licence"] == "Apache-2.0" and prov["url"] == "https://github.com/ai-dynamo/aiconfigurator"
    assert (prov["system"], prov["chip"], prov["engine"], prov["version"]) == ("h200_sxm", "H200-SXM", "trtllm",
                                                                              VERSION)
    moe = prov["families"]["moe"]
    assert moe["rows_read"] == 81 and moe["rows_kept"] == 27  # one routing of three
    assert sum(moe["skipped"].values()) == 54
    assert set(prov["families"]) == {"gemm", "generation_attention", "allreduce", "moe"}


def test_rows_faster_than_hbm_are_dropped_and_counted(sample_tables):
    prov = json.loads((sample_tables / "l40s" / f"trtllm-{VERSION}" / "provenance.json").read_text())
    gemm = prov["families"]["gemm"]
    assert gemm["dropped"]["faster than HBM at the datasheet peak"] > 0
    assert gemm["rows_kept"] + sum(gemm["dropped"].values()) == gemm["rows_read"]
    chip = get_chip("L40S")
    kept = read_table_rows(sample_tables / "l40s" / f"trtllm-{VERSION}" / "gemm.csv")
    for row in kept:  # every row shipped is at or above the datasheet floor
        rec = normalise("gemm", {"gemm_dtype": "bfloat16", "m": row["m"], "n": row["n"], "k": row["k"],
                                 "latency": float(row["latency_s"]) * 1e3})
        assert rec.seconds >= floor_s("gemm", rec, chip)[0]


def _write_db(tmp_path, rows: list[dict]):
    d = tmp_path / "db" / "h200_sxm" / "gemm" / "trtllm" / VERSION
    d.mkdir(parents=True)
    with (d / "gemm_perf.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return tmp_path / "db"


def test_repeats_take_the_median_and_one_kernel_per_key(tmp_path):
    base = [r for r in _db_rows("h200_sxm", f"gemm/trtllm/{VERSION}/gemm_perf.csv")
            if r["gemm_dtype"] == "bfloat16" and r["n"] == "4096"][:6]
    rows = [dict(r) for r in base]
    first = base[0]
    ms = float(first["latency"])
    rows += [dict(first, latency=ms * 1.10), dict(first, latency=ms * 1.30)]  # repeats: median = 1.10x
    # another kernel that timed only two of the shapes, faster: not the kernel most shapes were timed with
    rows += [dict(r, kernel_source="other", latency=float(r["latency"]) / 2) for r in base[1:3]]
    db = _write_db(tmp_path, rows)
    prov = import_tables(db, "h200_sxm", "trtllm", out=tmp_path / "out")
    tables = load("h200_sxm", "trtllm", data_dir=tmp_path / "out")
    m, n, k = (int(first[c]) for c in ("m", "n", "k"))
    assert tables.gemm_s("bf16", m, n, k) == pytest.approx(ms * 1.10e-3, rel=1e-3)
    second = base[1]
    assert tables.gemm_s("bf16", int(second["m"]), n, int(second["k"])) == pytest.approx(
        float(second["latency"]) * 1e-3, rel=1e-3)
    assert prov["families"]["gemm"]["kernels"] == {"torch_flow": 6}
    assert prov["families"]["gemm"]["repeats_merged"] == 2


def test_missing_pyarrow_names_the_venv_script(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    d = tmp_path / "db" / "h200_sxm" / "gemm" / "trtllm" / VERSION
    d.mkdir(parents=True)
    (d / "gemm_perf.parquet").write_bytes(b"PAR1")
    with pytest.raises(MissingDependencyError, match="tools/kernel_db_venv.sh"):
        import_tables(tmp_path / "db", "h200_sxm", "trtllm", out=tmp_path / "out")
    result = CliRunner().invoke(app, ["profile", "import-kernels", "--db", str(tmp_path / "db"), "--system",
                                      "h200_sxm", "--engine", "trtllm", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "tools/kernel_db_venv.sh" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args, named", [
    (["--system", "h999"], "h999"),
    (["--engine", "tensorrt"], "tensorrt"),
    (["--version", "9.9"], "9.9"),
])
def test_bad_system_engine_or_version_exits_2_naming_it(tmp_path, args, named):
    given = {"--system": "h200_sxm", "--engine": "trtllm"}
    given.update(dict(zip(args[::2], args[1::2])))
    cmd = ["profile", "import-kernels", "--db", str(SAMPLE_DB), "--out", str(tmp_path)]
    for flag, value in given.items():
        cmd += [flag, value]
    result = CliRunner().invoke(app, cmd)
    assert result.exit_code == 2, result.output
    assert named in result.output


def test_cli_import_writes_tables(tmp_path):
    shutil.copytree(SAMPLE_DB, tmp_path / "db")
    result = CliRunner().invoke(app, ["profile", "import-kernels", "--db", str(tmp_path / "db"), "--system",
                                      "l40s", "--engine", "trtllm", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "dropped" in result.output and "faster than HBM" in result.output
    assert load("l40s", "trtllm", data_dir=tmp_path / "out") is not None


def test_import_tables_rejects_a_missing_db(tmp_path):
    with pytest.raises(InputError, match="--db"):
        import_tables(tmp_path / "nope", "h200_sxm", "trtllm", out=tmp_path)
