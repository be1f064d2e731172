"""``placer estimate``: one instance's predicted figures, no ILP — a thin face over
:func:`placer.estimate.estimate` (a table, or the Estimate JSON of docs/contracts.md with ``--json``).

Mounted lazily by :mod:`placer.cli.app`: this module is imported only when the command runs.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from placer.cli.fold import Fold
from placer.cli.output import fail, latest_from_database, out
from placer.errors import InputError, PlacerError
from placer.estimate import estimate as run_estimate

_UNITS = {
    "prefill_s": "s", "prefill_tokens_per_s": "input tokens/s", "decode_batch": "sequences",
    "decode_step_s": "s", "decode_tokens_per_s": "output tokens/s", "max_batch": "sequences",
    "kv_bytes_per_token": "B", "ttft_s": "s",
}


def estimate(
    model: Annotated[str, typer.Option("--model", help="Catalog model name, e.g. llama-3.1-8b.", show_default=False)],
    chip: Annotated[str, typer.Option("--chip", help="Catalog chip name, e.g. H100-SXM.", show_default=False)],
    tp: Annotated[int, typer.Option("--tp", help="Chips per instance (any positive integer).", show_default=False)],
    shape: Annotated[str | None, typer.Option("--shape", help=(
        "How the --tp chips split the model: tp (one tensor-parallel group; MoE: attention TP × experts EP), "
        "pp (dense, whole 8-chip nodes: tp 8 × pp stages), dep (MoE: attention data parallel × expert "
        "parallel). Default: dense tp, MoE dep where the replicas fit, else tp."))] = None,
    weight_dtype: Annotated[str | None, typer.Option(
        "--weight-dtype", help="bf16, fp8, int8, int4 or fp4 (fp4 only on chips with an fp4 rate; default: the model's native dtype).")] = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", help="bf16, fp8, int8 or fp4 (fp4 only on chips with an fp4 rate; default bf16).")] = None,
    input_tokens: Annotated[int, typer.Option("--input", help="Prompt tokens I.")] = 2048,
    output_tokens: Annotated[int, typer.Option("--output", help="Output tokens O (decode at context I + O/2).")] = 256,
    hit: Annotated[float, typer.Option("--hit", help="Prefix-cache hit rate of the prompt, in [0, 1).")] = 0.0,
    batch: Annotated[int | None, typer.Option("--batch", help="Decode batch (default: the largest meeting "
                                              "--tpot and memory).")] = None,
    tpot: Annotated[float | None, typer.Option("--tpot", help="Time per output token to meet, s.")] = None,
    chunk: Annotated[int, typer.Option("--chunk", help="New tokens per prefill forward of the instance.")] = 8192,
    mtp_accept: Annotated[float, typer.Option("--mtp-accept", help="Tokens accepted per decode step with "
                                              "MTP / speculative decoding (1: none).")] = 1.0,
    profiles: Annotated[str | None, typer.Option("--profiles", help="Measured profiles: a profile JSON, a "
                                                 "table CSV, a directory of them, or 'latest' (database): the "
                                                 "chip's efficiencies, and its measured tables where they match.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the Estimate JSON instead of a table.")] = False,
) -> None:
    """Predict one instance's prefill, decode and memory figures (no ILP)."""
    try:
        result = run_estimate(model, chip, tp, weight_dtype, kv_dtype, input_tokens, output_tokens, hit, batch,
                              tpot, chunk, mtp_accept, profiles, latest=latest_from_database, shape=shape)
    except (PlacerError, OSError) as e:
        fail(e if isinstance(e, PlacerError) else InputError(f"--profiles {profiles}: {e}"))
    data = result.to_dict()
    if json_out:
        print(json.dumps(data, indent=2))
        return
    rows = [(key, f"{data[key]:,.4g}" if isinstance(data[key], float) else f"{data[key]:,}", unit)
            for key, unit in _UNITS.items()]
    rows += [("bound", f"prefill {data['bound']['prefill']}, decode {data['bound']['decode']}", ""),
             ("source", data["source"], ""), ("shape", data["shape"], ""), ("layout", data["layout"], "")]
    table = Fold(f"{model} on {tp} x {chip}, {data['layout']}", ("figure", "value", "unit"), rows, right=("value",))
    out.print(table)
