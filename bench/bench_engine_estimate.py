"""Our engine's measured forwards against placer's two prediction paths (issue 13 part 5).

    python bench/bench_engine_estimate.py --device cuda --model llama-3.1-8b --grid gpu \
        --chip-profile out/profile.json --json out/model-llama-3.1-8b.json
    python bench/bench_engine_estimate.py --tiny          # a dry run on the CPU (seconds)
    python bench/bench_engine_estimate.py --model llama-3.1-8b --rules-on-roofline H200-SXM   # no device

What it does, for one model shape on one device:

1. ``placer profile model`` (:func:`profiler.model.profile_model`): the executor's engine with
   random weights of the catalog model's shape times one prefill forward per (new tokens,
   cached context) and one decode step per (batch, context) of the grid — the measured table.
2. The same engine then times every grid point again and every point between them
   (:func:`profiler.model.between_grid`: each axis' geometric midpoints), the same way.
3. Each point of (2) is predicted twice, as ``placer estimate`` would:
   * **roofline**: the chip's datasheet peaks × the efficiencies of ``--chip-profile``
     (``placer profile chip``; the catalog defaults without one) — no table;
   * **table**: the same with (1)'s table, interpolated where the point lies between its grid.
   The model both predict for is the shape measured (``model_shape``: layers, widths, vocabulary,
   tied embeddings), so a difference is the performance model's, not the shape's.
4. Prints measured, each prediction and its ratio per point, then per path the median and worst
   factor (max(r, 1/r)) against the issue's targets: roofline within 15 %; table within 5 % at
   the grid points (a second measurement of the same point: the table's repeatability) and 10 %
   between them (its interpolation). Between the grid's points it also prints the table's
   corners interpolated bilinearly in plain tokens and seconds (the "linear rule"): a latency
   that is a fixed part plus work affine in each axis (decode: ∝ batch, KV read ∝ batch ×
   context) is exact under it, while the table's log-log rule overestimates it between grid
   points (up to 17 % at the ``gpu`` grid's midpoints for an 8B prefill on the roofline); a
   step where a cached context first appears (another kernel path) favours the log axis. Which
   holds on hardware is this comparison's to show. ``--json`` writes the table's profile, the
   points and the summary (bench/gpu_check.sh reads it).

The roofline column needs a bfloat16 engine (the planner's ``bf16``); a float32 engine's table is
compared by the table path alone. On the CPU the chip is the profiler's rooflines of this host
(not a catalog chip), so the roofline column there says what a datasheet-less CPU would get; the
figures that matter are the GPU's (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path

from placer.catalog import Chip, ModelConfig, chip_catalog, get_chip, get_model
from placer.errors import InputError, PlacerError
from placer.perfmodel import InstanceModel
from placer.profiles.lookup import measured_instance
from placer.profiles.records import ChipProfile, load_chip_profile
from placer.profiles.tables import Grid
from profiler.model import GRIDS, between_grid, profile_model

TARGETS = {"roofline": 1.15, "table at grid points": 1.05, "table between grid points": 1.10,
           "table between grid points, linear rule": 1.10}
TINY_SHAPE = {"num_layers": 2, "hidden_size": 128, "num_q_heads": 4, "num_kv_heads": 2, "head_dim": 32,
              "intermediate_size": 384, "vocab_size": 512}
SHAPE_FLAGS = {"layers": "num_layers", "hidden": "hidden_size", "heads": "num_q_heads", "kv-heads": "num_kv_heads",
               "head-dim": "head_dim", "intermediate": "intermediate_size", "vocab": "vocab_size"}


def model_of(table: dict) -> ModelConfig:
    """The performance model's view of the shape the table measured (exact parameter count,
    vocabulary and tying: the roofline reads what the engine read)."""
    shape = table["model_shape"]
    billions = shape["params"] / 1e9
    return ModelConfig(name=table["model"], attn="gqa", layers=shape["num_layers"], hidden=shape["hidden_size"],
                       q_heads=shape["num_q_heads"], kv_heads=shape["num_kv_heads"], head_dim=shape["head_dim"],
                       params_total_b=billions, params_active_b=billions, vocab=shape["vocab_size"],
                       tied_embeddings=bool(shape.get("tied_embeddings", False)))


def chip_of(profile: dict) -> Chip:
    """The catalog chip the table is keyed to, or (the CPU) a chip of the profiler's rooflines."""
    name = profile["tables"][0]["chip"]
    if name in chip_catalog():
        return get_chip(name)
    roof = profile["rooflines"]
    flops = roof["flop_per_s"]
    return Chip(name=name, vendor="host", bf16_tflops=flops.get("bf16", max(flops.values())) / 1e12,
                fp8_tflops=None, mem_gb=(roof.get("mem_capacity_bytes") or 8e9) / 1e9,
                mem_bw_tbps=roof["mem_bw_bytes_per_s"] / 1e12, scaleup_gbps_bidir=1.0, nic_gbit=1.0, tdp_w=1.0,
                price_usd_per_h=1.0)


def predictions(profile_path: Path, profile: dict, chip_profile: Path | None, points: dict) -> list[dict]:
    """Each measured point of ``points`` beside the roofline path's and the table path's prediction."""
    table = profile["tables"][0]
    model, chip = model_of(table), chip_of(profile)
    bf16 = table["model_shape"].get("dtype") == "bfloat16"
    base = [chip_profile] if chip_profile else []
    roofline = measured_instance(model, chip, 1, "bf16", "bf16", base or None) if bf16 else None
    measured = measured_instance(model, chip, 1, "bf16", "bf16", [*base, profile_path])
    on_grid = {("prefill", t, c) for t in table["prefill"]["sizes"] for c in table["prefill"]["context_tokens"]}
    on_grid |= {("decode", b, c) for b in table["decode"]["sizes"] for c in table["decode"]["context_tokens"]}
    grids = {"prefill": measured.table.prefill, "decode": measured.table.decode}  # the cleaned grids
    rows = []
    for phase, size_key in (("prefill", "tokens"), ("decode", "batch")):
        for p in points[phase]:
            size, context = p[size_key], p["context"]
            if phase == "prefill":
                predict = lambda im: im.prefill_chunk_s(context + size, context, size)  # noqa: E731
                source = measured.source_of_prefill(context, size)
            else:
                predict = lambda im: im.step_s(size, context)  # noqa: E731
                source = measured.source_of_step(size, context)
            row = {"phase": phase, size_key: size, "context": context, "measured_s": p["seconds"],
                   "on_grid": (phase, size, context) in on_grid, "table_s": predict(measured), "table_source": source}
            if not row["on_grid"]:
                row["table_linear_s"] = linear_rule(grids[phase], size, context)
            if roofline is not None:
                row["roofline_s"] = predict(roofline)
            rows.append(row)
    return rows


def linear_rule(grid, size: float, context: float) -> float:
    """The table's cleaned corners interpolated bilinearly in plain tokens and seconds: the rule a
    latency affine in each axis (a fixed part + work ∝ batch, ∝ batch × context) is exact under,
    printed beside the table's own log-log rule for points between the grid's (issue 13 part 3)."""
    def cell(axis, x):
        i = max(k for k in range(len(axis) - 1) if axis[k] <= x) if len(axis) > 1 else 0
        i = min(i, len(axis) - 2)
        return i, (x - axis[i]) / (axis[i + 1] - axis[i])
    (i, u), (j, v) = cell(grid.sizes, size), cell(grid.contexts, context)
    at = lambda a, b: grid.seconds_at(grid.sizes[a], grid.contexts[b])  # noqa: E731
    return ((1 - u) * (1 - v) * at(i, j) + u * (1 - v) * at(i + 1, j) + (1 - u) * v * at(i, j + 1)
            + u * v * at(i + 1, j + 1))


def rules_on_roofline(model: str, chip: str, grid: str) -> str:
    """Both interpolation rules on a noise-free table: the roofline's own latencies on ``grid``, asked
    at every point between the grid's (no device: what the rules alone cost)."""
    im = InstanceModel(get_chip(chip), 1, get_model(model), "bf16", "bf16")
    phases = {"prefill": lambda t, c: im.prefill_chunk_s(c + t, c, t), "decode": im.step_s}
    lines = [f"interpolation rules on the roofline of {model} on {chip}, grid {grid} (predicted / roofline):"]
    for (phase, latency), sizes, contexts, mid_sizes, mid_contexts in zip(
            phases.items(), GRIDS[grid][::2], GRIDS[grid][1::2], between_grid(grid)[::2], between_grid(grid)[1::2]):
        table = Grid(tuple(map(float, sizes)), tuple(map(float, contexts)),
                     tuple(tuple(latency(s, c) for c in contexts) for s in sizes))
        points = [(s, c) for s in mid_sizes for c in contexts] + [(s, c) for s in (*sizes, *mid_sizes)
                                                                   for c in mid_contexts]
        for rule, answer in (("log-log (the table's)", table.seconds_at), ("linear", partial(linear_rule, table))):
            r = [answer(s, c) / latency(s, c) for s, c in points]
            lines.append(f"  {phase:8} {rule:22} {len(r)} points: median {statistics.median(r):.3f}, "
                         f"range {min(r):.3f}-{max(r):.3f}")
    return "\n".join(lines)


def factor(predicted: float, measured: float) -> float:
    return math.exp(abs(math.log(predicted / measured)))


def summarise(rows: list[dict]) -> dict:
    """Per path: points, median and worst factor, the target and whether it is met."""
    groups = {"roofline": [(r["roofline_s"], r["measured_s"]) for r in rows if "roofline_s" in r],
              "table at grid points": [(r["table_s"], r["measured_s"]) for r in rows if r["on_grid"]],
              "table between grid points": [(r["table_s"], r["measured_s"]) for r in rows if not r["on_grid"]],
              "table between grid points, linear rule": [(r["table_linear_s"], r["measured_s"]) for r in rows
                                                         if "table_linear_s" in r]}
    out = {}
    for name, pairs in groups.items():
        f = [factor(p, m) for p, m in pairs]
        out[name] = {"n": len(f), "median_factor": statistics.median(f) if f else None,
                     "worst_factor": max(f) if f else None, "target_factor": TARGETS[name],
                     "met": bool(f) and max(f) <= TARGETS[name]}
    return out


def usable_chip_profile(path: Path | None, progress=print) -> tuple[Path | None, str | None]:
    """(the chip profile, None) when it loads, else (None, why): checked before any measurement, so a
    failed or missing ``placer profile chip`` run costs the comparison its efficiencies, not its device time."""
    if path is None:
        return None, None
    try:
        load_chip_profile(path)
    except (OSError, ValueError, PlacerError) as e:
        why = f"--chip-profile {path}: not used ({e}); the roofline takes the catalog's default efficiencies"
        progress(why)
        return None, why
    return path, None


def run(device: str, model: str, grid: str, reps: int, chip_profile: Path | None, overrides: dict | None,
        dtype: str | None, workdir: Path, progress=print) -> dict:
    """Measure the table and the points, predict them; the whole result (see the module docstring)."""
    chip_profile, chip_profile_error = usable_chip_profile(chip_profile, progress)
    mid_tokens, mid_contexts, mid_batches, mid_decode = between_grid(grid)  # checks the name
    tokens, contexts, batches, decode_contexts = GRIDS[grid]
    prefill = [(t, c) for t in tokens for c in contexts] + [(t, c) for t in mid_tokens for c in mid_contexts]
    decode = [(b, c) for b in batches for c in decode_contexts] + [(b, c) for b in mid_batches for c in mid_decode]
    held: dict = {}
    raw = profile_model(device, model, 1, grid, None, reps, overrides, dtype=dtype,
                        then=lambda measure: held.update(measure(prefill, decode)))
    profile_path = workdir / "model-profile.json"
    ChipProfile.model_validate(raw).save(profile_path)
    table = raw["tables"][0]
    progress(f"measured: {table['model']} on {table['chip']} ({table['engine']}), {raw['duration_s']:.1f} s")
    rows = predictions(profile_path, raw, chip_profile, held)
    return {"device": device, "model": table["model"], "chip": table["chip"], "engine": table["engine"],
            "chip_profile": str(chip_profile) if chip_profile else None, "chip_profile_error": chip_profile_error,
            "grid": grid, "reps": reps,
            "profile": raw, "points": rows, "summary": summarise(rows)}


def report(result: dict) -> str:
    lines = [f"{result['model']} on {result['chip']} ({result['engine']}); roofline efficiencies: "
             f"{result['chip_profile'] or 'catalog defaults'}",
             f"{'phase':8} {'point':>16} {'grid':>5} {'measured ms':>12} {'roofline ms':>12} {'ratio':>6} "
             f"{'table ms':>10} {'ratio':>6} {'linear rule':>11}"]
    for r in result["points"]:
        point = f"{r.get('tokens', r.get('batch'))} @ {r['context']}"
        roof = r.get("roofline_s")
        lines.append(f"{r['phase']:8} {point:>16} {'yes' if r['on_grid'] else 'no':>5} "
                     f"{r['measured_s'] * 1e3:12.3f} "
                     + (f"{roof * 1e3:12.3f} {roof / r['measured_s']:6.2f} " if roof else f"{'n/a':>12} {'':6} ")
                     + f"{r['table_s'] * 1e3:10.3f} {r['table_s'] / r['measured_s']:6.2f}"
                     + (f" {r['table_linear_s'] / r['measured_s']:11.2f}" if "table_linear_s" in r else ""))
    for name, s in result["summary"].items():
        if s["n"]:
            lines.append(f"{name}: {s['n']} points, median factor {s['median_factor']:.3f}, worst "
                         f"{s['worst_factor']:.3f} (target {s['target_factor']}: {'met' if s['met'] else 'NOT met'})")
        else:
            lines.append(f"{name}: no points (the roofline needs a bfloat16 engine)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu or cuda / cuda:N")
    ap.add_argument("--model", default="llama-3.1-8b", help="catalog Llama-architecture model (its shape)")
    ap.add_argument("--grid", default=None, help="profiler.model.GRIDS name (default: gpu on CUDA, tiny on the CPU)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs per point (the median is kept)")
    ap.add_argument("--chip-profile", type=Path, default=None, help="`placer profile chip` JSON: the efficiencies")
    ap.add_argument("--dtype", default=None, help="engine dtype: bfloat16 (default) or float32")
    ap.add_argument("--tiny", action="store_true", help="a tiny shape (a dry run on the CPU)")
    for flag, key in SHAPE_FLAGS.items():
        ap.add_argument(f"--{flag}", type=int, default=None, help=f"override: {key} (as placer profile model)")
    ap.add_argument("--json", type=Path, default=None, help="write the result here")
    ap.add_argument("--rules-on-roofline", metavar="CHIP", default=None,
                    help="no measurement: both interpolation rules on the roofline's own table of --model on CHIP")
    args = ap.parse_args(argv)
    if args.rules_on_roofline:
        try:
            print(rules_on_roofline(args.model, args.rules_on_roofline, args.grid or "gpu"))
        except (InputError, KeyError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    grid = args.grid or ("gpu" if args.device.startswith("cuda") else "tiny")
    overrides = {**(TINY_SHAPE if args.tiny else {}),
                 **{key: getattr(args, flag.replace("-", "_")) for flag, key in SHAPE_FLAGS.items()
                    if getattr(args, flag.replace("-", "_")) is not None}}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(args.device, args.model, grid, args.reps, args.chip_profile,
                         overrides or None, args.dtype or "bfloat16", Path(tmp),
                         progress=lambda m: print(m, file=sys.stderr))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
