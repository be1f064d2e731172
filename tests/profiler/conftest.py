"""Fixtures for profiler tests: one quick CPU profile per session, synthetic profiles,
a link-probe server in its own process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from placer.catalog import get_chip
from placer.cli import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli_app() -> typer.Typer:
    """The `placer` app: `profile` reaches it through the placer.commands entry point."""
    return app


@pytest.fixture(scope="session")
def quick_run(cli_app, tmp_path_factory):
    """`placer profile chip --device cpu --quick --json --out F`, run once: (result, seconds, out file); the
    user data dir (where every result is also kept) is the folder beside F."""
    folder = tmp_path_factory.mktemp("profile")
    out = folder / "cpu.json"
    start = time.perf_counter()
    result = CliRunner().invoke(cli_app, ["profile", "chip", "--device", "cpu", "--quick", "--json", "--out", str(out)],
                                env={"XDG_DATA_HOME": str(folder / "data")})
    return result, time.perf_counter() - start, out


def synthetic_profile(chip: str, compute_efficiency: float, mem_bw_efficiency: float,
                      measured_at: str = "2026-11-29T12:00:00+00:00", **overrides) -> dict:
    """A valid ChipProfile dict for a catalog chip at the given efficiencies (3 samples each)."""
    c = get_chip(chip)
    bf16, bw = c.bf16_tflops * 1e12, c.mem_bw_tbps * 1e12
    source = f"datasheet {chip}"

    def meas(dimension, name, unit, value, roofline, **params):
        samples = [value * 0.99, value, value * 1.005]
        return {"dimension": dimension, "name": name, "unit": unit, "samples": samples, "median": value,
                "min": min(samples), "max": max(samples), "spread_rel": 0.015, "stdev_rel": 0.008,
                "roofline": roofline, "roofline_source": source, "params": params}

    profile = {
        "schema_version": 1, "kind": "chip", "chip": chip, "quick": False,
        "provenance": {"host": "gpu-node-7", "measured_by": "ci@gpu-node-7", "measured_at": measured_at,
                       "device": "cuda:0", "device_model": f"NVIDIA {chip}", "driver": "580.159.04",
                       "cuda_runtime": "13.0", "torch_version": "2.11.0", "triton_version": "3.6.0"},
        "rooflines": {"source": source, "datasheet": True, "flop_per_s": {"bf16": bf16},
                      "mem_bw_bytes_per_s": bw, "mem_capacity_bytes": c.mem_gb * (1 << 30)},
        "measurements": [
            meas("compute", "matmul bf16 8192x8192x8192", "flop_per_s", compute_efficiency * bf16, bf16,
                 dtype="bf16", m=8192, n=8192, k=8192),
            meas("memory_bandwidth", "copy torch", "bytes_per_s", mem_bw_efficiency * bw, bw),
        ],
        "summary": {"compute_flop_per_s": {"bf16": compute_efficiency * bf16},
                    "mem_bw_bytes_per_s": mem_bw_efficiency * bw},
        "efficiency": {"compute_efficiency": compute_efficiency, "mem_bw_efficiency": mem_bw_efficiency,
                       "compute_by_dtype": {"bf16": compute_efficiency}},
    }
    profile.update(overrides)
    return profile


def write_profile(path: Path, profile: dict) -> Path:
    path.write_text(json.dumps(profile))
    return path


@pytest.fixture
def link_server():
    """`python -m profiler.link --listen 0` in a separate process; yields HOST:PORT."""
    proc = subprocess.Popen([sys.executable, "-m", "profiler.link", "--listen", "0", "--bind", "127.0.0.1"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"link server did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
