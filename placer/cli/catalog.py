"""``placer catalog chips|models [--json]``: the catalog the planner plans with, at hand.

in:  :func:`placer.catalog.listing.chip_rows` / :func:`~placer.catalog.listing.model_rows`
out: a table of the key figures that fits 100 columns with each row's source under it, or with
     ``--json`` every figure of every row (``{"chips": [...], "sources": ...}``, docs/contracts.md).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from placer.catalog.listing import SOURCES_FILE, chip_rows, model_rows
from placer.cli.output import out

catalog_app = typer.Typer(
    help="The chips and models the planner knows, with the figures it uses and their sources.",
    no_args_is_help=True, add_completion=False)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print every figure of every row as JSON.")]


def _num(value: float | None, digits: int = 0) -> str:
    """A figure with thousands separators, ``-`` for none (one format for every column)."""
    return "-" if value is None else f"{value:,.{digits}f}"


def _billions(value: float) -> str:
    """Parameters in billions: whole above 100 (``1,000``), three significant digits below (``6.74``)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _sources(rows: list[dict]) -> Text:
    """Each source once, with the rows that took their figures from it."""
    by_source: dict[str, list[str]] = {}
    for row in rows:
        by_source.setdefault(row["source"] or "unknown", []).append(row["name"])
    lines = [f"{source}: {', '.join(names)}" for source, names in by_source.items()]
    return Text("\n".join(["sources (details in " + SOURCES_FILE + "):", *lines]), style="dim")


def _table(title: str) -> Table:
    """A table two spaces between columns, no frame: 12 columns of figures in 100."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                 padding=(0, 1), collapse_padding=True)


@catalog_app.command("chips")
def chips(json_out: JsonOpt = False) -> None:
    """Accelerators: dense peak TFLOP/s per dtype, HBM, bandwidth, interconnect, TDP and price."""
    rows = chip_rows()
    if json_out:
        print(json.dumps({"chips": rows, "sources": SOURCES_FILE}, indent=2))
        return
    t = _table("chips: dense peak TFLOP/s per chip (the planner uses peak x efficiency)")
    for col in ("chip", "vendor", "bf16", "fp8", "fp4", "HBM\nGiB", "HBM\nTB/s", "scale-up\nGB/s", "NIC\nGbit/s",
                "TDP\nW", "USD/h", "conf."):
        t.add_column(col, justify="left" if col in ("chip", "vendor", "conf.") else "right", no_wrap=True)
    for r in rows:
        price = f"{r['price_usd_per_h']:.2f}" + ("" if r["price_source"].startswith("price survey") else "*")
        t.add_row(r["name"], r["vendor"], _num(r["bf16_tflops"]), _num(r["fp8_tflops"]), _num(r["fp4_tflops"]),
                  _num(r["mem_gb"]), _num(r["mem_bw_tbps"], 2), _num(r["scaleup_gbps_bidir"]), _num(r["nic_gbit"]),
                  _num(r["tdp_w"]), price, r["confidence"])
    note = Text("USD/h: an indicative rental price, an input to override (* an estimate, else a May 2026 survey); "
                "efficiencies until profiled: compute {:.2f}, HBM {:.2f}, interconnect {:.2f}; conf.: high = vendor "
                "datasheet, medium = secondary sources agree, low = sources conflict.".format(
                    rows[0]["compute_efficiency"], rows[0]["mem_bw_efficiency"], rows[0]["interconnect_efficiency"]),
                style="dim")
    out.print(Group(t, note, _sources(rows)))


@catalog_app.command("models")
def models(json_out: JsonOpt = False) -> None:
    """LLMs: layers, heads, KV bytes per token, parameters, MoE layout and the Hugging Face id."""
    rows = model_rows()
    if json_out:
        print(json.dumps({"models": rows, "sources": SOURCES_FILE}, indent=2))
        return
    t = _table("models (placer export loads the Hugging Face id unless --model names another)")
    for col in ("model", "Hugging Face id", "layers", "heads\nq/kv", "KV KiB\n/token", "params\nB", "active\nB",
                "experts\n/top-k"):
        t.add_column(col, justify="left" if col in ("model", "Hugging Face id") else "right", no_wrap=True)
    for r in rows:
        kv = f"{r['q_heads']}/{r['kv_heads']}" if r["attn"] == "gqa" else f"{r['q_heads']}/MLA"
        experts = f"{r['experts']}/{r['experts_per_token']}" if r["moe"] else "dense"
        t.add_row(r["name"], r["hf_id"] or "-", str(r["layers"]), kv,
                  _num(r["kv_bytes_per_token"]["bf16"] / 1024, 1), _billions(r["params_total_b"]),
                  _billions(r["params_active_b"]), experts)
    note = Text("KV KiB/token in bf16; in fp8 / int8 / fp4, hidden size, vocabulary, shared experts and the rest: "
                "placer catalog models --json.", style="dim")
    out.print(Group(t, note, _sources(rows)))
