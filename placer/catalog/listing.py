"""The catalog as rows a user reads: every figure the planner uses, with where it came from.

in:  :func:`placer.catalog.chip_catalog`, :func:`placer.catalog.model_catalog` and the CSVs' own
     columns the records do not keep (``arch``, ``price_src``, ``source``, ``notes``)
out: :func:`chip_rows` and :func:`model_rows` — one JSON-ready dict per chip / model, the
     ``placer catalog chips|models --json`` contract (docs/contracts.md) — and :data:`SOURCES_FILE`.

Chips carry the datasheet peaks per dtype, memory, bandwidth, interconnect, TDP, price and the
efficiencies the planner multiplies them by (defaults until a profile replaces them); models their
shape, parameters, MoE layout, KV bytes per token in every KV dtype and the Hugging Face id that
``placer export`` loads. Each row names its ``source``; ``SOURCES.md`` beside the CSVs has the details.
"""

from __future__ import annotations

from dataclasses import asdict

from placer.catalog import KV_DTYPES, _rows, chip_catalog, model_catalog

#: where every figure's provenance is written out, relative to the installed package
SOURCES_FILE = "placer/catalog/SOURCES.md"
#: chips.csv ``price_src`` letters in words
PRICE_SOURCES = {"R": "price survey (May 2026)", "E": "estimate"}


def chip_rows() -> list[dict]:
    """One dict per catalog chip: the :class:`~placer.catalog.Chip` fields, the sustained rates the
    planner derives from them, ``arch``, ``price_source`` and ``source``."""
    raw = {row["name"]: row for row in _rows("chips.csv")}
    rows = []
    for name, chip in chip_catalog().items():
        extra = raw.get(name, {})
        rows.append({
            **asdict(chip),
            "arch": extra.get("arch", ""),
            "peak_tflops": {dtype: chip.peak_flops_per_s(dtype) / 1e12 for dtype in ("bf16", "fp8", "fp4")
                            if chip.has_rate(dtype)},
            "sustained_mem_bw_bytes_per_s": chip.mem_bw_bytes_per_s,
            "sustained_scaleup_bytes_per_s": chip.scaleup_bytes_per_s,
            "sustained_nic_bytes_per_s": chip.nic_bytes_per_s,
            "price_source": PRICE_SOURCES.get(extra.get("price_src", ""), extra.get("price_src", "")),
            "source": extra.get("source", ""),
        })
    return rows


def model_rows() -> list[dict]:
    """One dict per catalog model: the :class:`~placer.catalog.ModelConfig` fields, ``moe``,
    ``kv_bytes_per_token`` per KV dtype, ``notes`` and ``source``."""
    raw = {row["name"]: row for row in _rows("models.csv")}
    rows = []
    for name, model in model_catalog().items():
        extra = raw.get(name, {})
        rows.append({
            **asdict(model),
            "moe": model.experts > 0,
            "kv_bytes_per_token": {dtype: model.kv_bytes_per_token(dtype) for dtype in KV_DTYPES},
            "notes": extra.get("notes", ""),
            "source": extra.get("source", ""),
        })
    return rows
