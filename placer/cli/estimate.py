"""``placer estimate``: one instance's predicted figures, no ILP — a thin face over
:func:`placer.estimate.estimate` (a table, or the Estimate JSON of docs/contracts.md with ``--json``);
with ``--pareto``, over :func:`placer.estimate_pareto.pareto` (the decode frontier of tokens/s per GPU
against tokens/s per user over batches and instance shapes).

Mounted lazily by :mod:`placer.cli.app`: this module is imported only when the command runs.
"""

from __future__ import annotations

import json
import math
from typing import Annotated

import typer

from placer.cli.fold import Fold
from placer.cli.output import err, fail, latest_from_database, out
from placer.errors import InputError, PlacerError
from placer.estimate import estimate as run_estimate
from placer.estimate_pareto import DEFAULT_TPS, pareto as run_pareto
from placer.specs import ENGINE_HELP

#: The table's rows: (key, unit); the request and engine the figures assume come first.
_ASSUMED = (("input_tokens", "tokens"), ("output_tokens", "tokens"), ("hit_rate", "cached share"),
            ("decode_context_tokens", "tokens: I + O/2"), ("chunk_tokens", "new tok/forward"),
            ("mtp_accept", "tokens/step"), ("weight_dtype", ""), ("kv_dtype", ""), ("engine", ""))
#: why the decode batch is what it is, by Estimate.batch_from
_BATCH_FROM = {"--batch": "seq. (--batch)", "--tpot": "seq. (--tpot, KV)", "memory": "seq. (most KV fits)"}
_UNITS = (
    ("prefill_s", "s"), ("prefill_tokens_per_s", "in tok/s"), ("prefill_tokens_per_s_per_gpu", "in tok/s/GPU"),
    ("decode_batch", "sequences"), ("decode_step_s", "s"), ("tpot_s", "s/token"),
    ("decode_tokens_per_s", "out tok/s"), ("tokens_per_s_per_gpu", "out tok/s/GPU"),
    ("tokens_per_s_per_user", "out tok/s/user"), ("max_batch", "sequences"), ("kv_bytes_per_token", "B"),
    ("ttft_s", "s"),
)


def number(value) -> str:
    """A figure as people read it: integers and values ≥ 1,000 whole with thousands separators,
    smaller ones to 4 significant digits — never an exponent (``13,821`` beside ``6,318``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.{max(0, 3 - math.floor(math.log10(abs(value))))}f}"


def _given(value) -> str:
    """An assumed input as the user gave it: ``0.93``, ``1``, ``40,310`` — thousands separators, no exponent,
    no padding zeros."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, float):
        return f"{value:,.6f}".rstrip("0").rstrip(".")
    return number(value)


def _batch_line(data: dict) -> str:
    """Why the decode batch is what it is, in words."""
    why = {"--batch": "as given by --batch",
           "--tpot": f"the most sequences whose step meets --tpot {_given(data['target_tpot_s'])} s and whose KV fits",
           "memory": "the most sequences whose KV fits (no --tpot or --batch)"}[data["batch_from"]]
    return f"decode batch {number(data['decode_batch'])}: {why}"


def _check_tps(tps: list[int] | None, pareto: bool, batch: int | None) -> None:
    if pareto and batch is not None:
        raise InputError("--batch with --pareto: the frontier sweeps the batch (give --tpot to mark the points "
                         "that meet it)")
    if not pareto and not tps:
        raise InputError("--tp is required: chips per instance (or --pareto to sweep "
                         f"{', '.join(map(str, DEFAULT_TPS))})")
    if not pareto and len(tps) > 1:
        raise InputError(f"one --tp without --pareto, got {', '.join(map(str, tps))}")


def estimate(
    model: Annotated[str, typer.Option("--model", help="Catalog model name, e.g. llama-3.1-8b.", show_default=False)],
    chip: Annotated[str, typer.Option("--chip", help="Catalog chip name, e.g. H100-SXM.", show_default=False)],
    tp: Annotated[list[int] | None, typer.Option("--tp", help=(
        "Chips per instance (any positive integer; required without --pareto). With --pareto: repeat to sweep "
        f"several (--tp 4 --tp 8); omitted, {', '.join(map(str, DEFAULT_TPS))} (the scenario default tp_degrees)."),
        metavar="N", show_default=False)] = None,
    shape: Annotated[str | None, typer.Option("--shape", help=(
        "How the --tp chips split the model: tp (one tensor-parallel group; MoE: attention TP × experts EP), "
        "pp (dense, whole 8-chip nodes: tp 8 × pp stages), dep (MoE: attention data parallel × expert "
        "parallel). Default: dense tp, MoE dep where the replicas fit, else tp; with --pareto, every "
        "admissible shape."))] = None,
    weight_dtype: Annotated[str | None, typer.Option(
        "--weight-dtype", help="bf16, fp8, int8, int4 or fp4 (fp4 only on chips with an fp4 rate; default: the model's native dtype).")] = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", help="bf16, fp8, int8 or fp4 (fp4 only on chips with an fp4 rate; default bf16).")] = None,
    input_tokens: Annotated[int, typer.Option("--input", help="Prompt tokens I.")] = 2048,
    output_tokens: Annotated[int, typer.Option("--output", help="Output tokens O (decode at context I + O/2).")] = 256,
    hit: Annotated[float, typer.Option("--hit", help="Prefix-cache hit rate of the prompt, in [0, 1).")] = 0.0,
    batch: Annotated[int | None, typer.Option("--batch", help="Decode batch (default: the largest meeting "
                                              "--tpot and memory).")] = None,
    tpot: Annotated[float | None, typer.Option("--tpot", help="Time per output token to meet, s (with --pareto: "
                                               "marks the points that meet it).")] = None,
    chunk: Annotated[int, typer.Option("--chunk", help="New tokens per prefill forward of the instance.")] = 8192,
    mtp_accept: Annotated[float, typer.Option("--mtp-accept", help="Tokens accepted per decode step with "
                                              "MTP / speculative decoding (1: none).")] = 1.0,
    engine: Annotated[str, typer.Option("--engine", help=ENGINE_HELP)] = "roofline",
    profiles: Annotated[str | None, typer.Option("--profiles", help="Measured profiles: a profile JSON, a "
                                                 "table CSV, a directory of them, or 'latest' (database): the "
                                                 "chip's efficiencies, and its measured tables where they match.")] = None,
    pareto: Annotated[bool, typer.Option("--pareto", help=(
        "The decode frontier instead: tokens/s per GPU against tokens/s per user over batches and instance "
        "shapes (--tp, or every default tp), only Pareto-optimal, memory-feasible points."))] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the Estimate JSON instead of a table.")] = False,
) -> None:
    """Predict one instance's prefill, decode and memory figures (no ILP).

    With --pareto: the decode frontier, tokens/s per GPU against tokens/s per user over batches and shapes."""
    try:
        _check_tps(tp, pareto, batch)
        if pareto:
            result = run_pareto(model, chip, tp or None, weight_dtype, kv_dtype, input_tokens, output_tokens, hit,
                                tpot, chunk, mtp_accept, profiles, latest=latest_from_database, shape=shape,
                                engine=engine)
        else:
            result = run_estimate(model, chip, tp[0], weight_dtype, kv_dtype, input_tokens, output_tokens, hit, batch,
                                  tpot, chunk, mtp_accept, profiles, latest=latest_from_database, shape=shape,
                                  engine=engine)
    except (PlacerError, OSError) as e:
        fail(e if isinstance(e, PlacerError) else InputError(f"--profiles {profiles}: {e}"))
    data = result.to_dict()
    if json_out:
        print(json.dumps(_frontier_json(data) if pareto else data, indent=2))
        return
    out.print(_pareto_table(data) if pareto else _table(data, model, chip))
    if pareto:
        _pareto_footer(data)
    else:  # under the table: a long source (a profile's path, an engine's fallback) would fold it
        out.print(_batch_line(data), highlight=False, markup=False)
        out.print(f"source: {data['source']}", highlight=False, markup=False)


def _frontier_json(data: dict) -> list[dict]:
    """``--pareto --json``: the list of frontier points (docs/contracts.md), each carrying what the frontier
    assumed (model, chip, engine, lengths, dtypes, ``--tpot``); what was left out goes to stderr, one line each."""
    assumed = {k: v for k, v in data.items() if k not in ("points", "excluded", "candidates")}
    for e in data["excluded"]:
        err.print(f"left out: {e['shape']} on {e['chips']} chips: {e['reason']}", highlight=False, markup=False,
                  soft_wrap=True)
    return [{**assumed, **p} for p in data["points"]]


def _table(data: dict, model: str, chip: str) -> Fold:
    rows = [(key, _given(data[key]), unit) for key, unit in _ASSUMED]  # as given
    batch_unit = _BATCH_FROM[data["batch_from"]]
    rows += [(key, number(data[key]), batch_unit if key == "decode_batch" else unit) for key, unit in _UNITS]
    rows += [("bound", f"{data['bound']['prefill']} / {data['bound']['decode']}", "prefill / decode"),
             ("shape", data["shape"], ""), ("layout", data["layout"], "")]
    return Fold(f"{model} on {data['chips']} x {chip}, {data['layout']}", ("figure", "value", "unit"), rows,
                right=("value",))


def _sources(points: list[dict]) -> dict[str, int]:
    """Each distinct source of the points and its footnote number, in order of appearance."""
    return {source: i for i, source in enumerate(dict.fromkeys(p["source"] for p in points), 1)}


def _pareto_table(data: dict) -> Fold:
    """The frontier's points, fastest per user first (fits 80 columns: the chips are in the layout, TPOT in
    ms); where points' sources differ, a footnote number each."""
    target, points = data["target_tpot_s"], data["points"]
    sources = _sources(points)
    headers = ["layout", "batch", "TPOT\nms", "tok/s\nper user", "tok/s\nper GPU"]
    headers += [f"≤ {target * 1e3:g}\nms"] if target is not None else []
    headers += ["src"] if len(sources) > 1 else []
    rows = []
    for p in points:
        row = [p["layout"], number(p["batch"]), number(p["tpot_s"] * 1e3), number(p["tokens_per_s_per_user"]),
               number(p["tokens_per_s_per_gpu"])]
        row += ["yes" if p["meets_tpot"] else "no"] if target is not None else []
        rows.append(row + ([f"[{sources[p['source']]}]"] if len(sources) > 1 else []))
    title = (f"{data['model']} on {data['chip']}, decode frontier: I {data['input_tokens']:,}, O "
             f"{data['output_tokens']:,}, hit {data['hit_rate']:g}, {data['weight_dtype']} weights, "
             f"{data['kv_dtype']} KV, engine {data['engine']}")
    return Fold(title, headers, rows, right=headers[1:5])


def _pareto_footer(data: dict) -> None:
    """The sources, the prefill side and what the frontier left out (the JSON's ``excluded``), one line each."""
    points = data["points"]
    sources = _sources(points)
    named = "; ".join(source if len(sources) == 1 else f"[{i}] {source}" for source, i in sources.items())
    say = lambda text: out.print(text, highlight=False, markup=False)  # noqa: E731 — names and paths print as given
    say(f"{len(points)} Pareto-optimal of {data['candidates']} memory-feasible points; tokens/s per GPU = "
        f"batch × accept / step / chips, per user = 1 / TPOT; source: {named}")
    prefill = {p["layout"]: p["prefill_tokens_per_s_per_gpu"] for p in points}
    say("prefill input tokens/s per GPU: " + ", ".join(f"{k} {number(v)}" for k, v in prefill.items()))
    for e in data["excluded"]:
        batches = e.get("batches")
        what = f"batches {number(batches[0])}–{number(batches[-1])}" if batches else "every batch"
        say(f"left out: {e['chips']} chip{'s' * (e['chips'] > 1)} {e['shape']}: {what}: {e['reason']}")
