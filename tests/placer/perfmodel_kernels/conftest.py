"""Fixtures: a tiny measured-kernel database in placer.kernels' shipped format (tmp dir), so these tests
hold whatever tables the repository ships."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import placer.kernels.tables as kernel_tables
from placer.catalog import get_chip, get_model
from placer.perfmodel.engines import op_costs
from placer.shapes import Shape, shape_model

MODEL, CHIP = "llama-3.1-8b", "H200-SXM"
#: the decode step the hand-checked case asks for
BATCH, CONTEXT = 8, 1000
#: seconds the tiny tables answer, per op (distinct, so a wrong sum shows)
GEMM_S = {"qkv": 11e-6, "o": 7e-6, "gate_up": 23e-6, "down": 13e-6, "lm_head": 31e-6}
ATTN_S = 5e-6


def roofline_model(chip: str = CHIP, tp: int = 1):
    return shape_model(Shape(tp), get_chip(chip), get_model(MODEL), "bf16", "bf16")


def _write(directory: Path, family: str, header: list[str], rows: list[list]) -> None:
    with open(directory / f"{family}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def write_tables(root: Path, system: str = "h200_sxm", engine: str = "vllm", version: str = "0.24.0") -> dict:
    """A tables directory answering exactly the decode step of (BATCH, CONTEXT) of MODEL at tp 1 (and
    twice the batch, so each axis has two points); returns {gemm name: (n, k)}."""
    d = root / system / f"{engine}-{version}"
    d.mkdir(parents=True)
    (d / "provenance.json").write_text(json.dumps({"system": system, "engine": engine, "version": version}))
    base = roofline_model()
    m = get_model(MODEL)
    shapes = {"qkv": ((m.q_heads + 2 * m.kv_heads) * m.head_dim, m.hidden), "o": (m.hidden, m.q_heads * m.head_dim),
              "gate_up": (round(2 * base.ffn_width), m.hidden), "down": (m.hidden, round(base.ffn_width)),
              "lm_head": (m.vocab, m.hidden)}
    rows = []
    for name, (n, k) in shapes.items():
        for rows_m, scale in ((BATCH, 1.0), (2 * BATCH, 2.0)):
            rows.append(["bf16", n, k, rows_m, GEMM_S[name] * scale])
    _write(d, "gemm", ["dtype", "n", "k", "m", "latency_s"], rows)
    att = [["bf16", m.head_dim, m.q_heads, m.kv_heads, b, c, ATTN_S * (b / BATCH) * (c / (CONTEXT + 1))]
           for b in (BATCH, 2 * BATCH) for c in (CONTEXT + 1, 2 * (CONTEXT + 1))]
    _write(d, "generation_attention", ["kv_dtype", "head_dim", "heads", "kv_heads", "batch", "context", "latency_s"],
           att)
    return shapes


@pytest.fixture
def tiny_tables(tmp_path, monkeypatch):
    """placer.kernels reads the tiny tables (vllm 0.24.0 on h200_sxm only)."""
    write_tables(tmp_path)
    monkeypatch.setattr(kernel_tables, "DATA_DIR", tmp_path)
    op_costs.cache_clear()
    yield tmp_path
    op_costs.cache_clear()
