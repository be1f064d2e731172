"""The performance model against published serving measurements: predicted vs published.

    PYTHONPATH=$PWD python bench/bench_fidelity.py [--csv bench/data/published_measurements.csv] [--json]
    PYTHONPATH=$PWD python bench/bench_fidelity.py --explain ID   # where a throughput row's time goes

Each row of the CSV is one published figure with its full setting, source URL and a
quote (``notes``). The model is evaluated at that setting through
:func:`placer.estimate.estimate` and the table prints id, model, chip, setting, metric,
published, predicted, the ratio predicted/published and whether the comparison is apples
to apples (``fair``: the CSV's judgement, from the source's setting; a figure its source
re-measured with a newer engine version at the same chip, model and lengths is judged by the
newest revision and the older row stays as history with ``fair`` = no and the reason — the
engine's maturity is not physics the model should absorb). At the end: the
median and worst |ln ratio| over the fair rows and over all evaluated rows, each also as
a factor exp(|ln ratio|), and the rows that could not be evaluated with the reason.

How a row's setting becomes a query (one rule per field, the same for every row):

* model: the catalog name, or the catalog model of identical architecture
  (:data:`SAME_ARCHITECTURE`); chip: the catalog name.
* dtypes: ``fp16`` is costed as ``bf16`` (same bytes, same tensor-core rate); a KV dtype
  the source leaves ``unstated`` is ``bf16`` (the engines' default ``auto`` = the
  activation dtype).
* batch: with data-parallel attention (``dp``/``dep`` in ``parallelism``) a published
  batch is per GPU, so the instance's batch is batch × chips; ``engine-chosen`` means the
  largest batch memory allows (no TPOT); ``N tokens/GPU`` is the prefill chunk (N × chips);
  ``(max_num_tokens N)`` after a batch is the engine's forward budget, the chunk (per rank with
  data-parallel attention, N × chips).
  The prefill chunk is otherwise 16,384 tokens per GPU with data-parallel attention
  (SGLang's large-EP setting) and 8,192 tokens per instance without (TensorRT-LLM's
  default ``max_num_tokens``).
* ``trtllm-bench`` rows (engine ``trtllm-bench``) whose batch is engine-chosen ran without
  ``--max_batch_size``/``--max_num_tokens``, so trtllm-bench chose both with its own heuristic
  (NVIDIA/TensorRT-LLM ``tensorrt_llm/bench/build/tuning.py``, :func:`trtllm_bench_limits`):
  the batch is the smaller of that ``max_batch_size`` (per rank with data-parallel attention)
  and what memory holds, the prefill chunk is that ``max_num_tokens``.
* metrics per GPU: the instance's figure / chips. ``throughput_output_tokens_per_s_per_chip``
  (offline runs: every request is prefilled and then decoded inside the timed run):
  output tokens/s = O / (I / P + O × step(B, I + O/2) / (B × accept)), P = packed prefill
  tokens/s — the steady state of in-flight batching and of a static batch alike.
  ``ttft_s``: one request alone. ``tpot_s``: step / accept.
* engine: the row's ``engine`` column names the engine that served it (SGLang, vLLM, TensorRT-LLM:
  :func:`row_engine`); each row is evaluated twice, with the roofline (``--engine roofline``, the old
  summary, kept for comparison) and with its engine's measured kernels (issue 41) — the chip's own tables
  where placer ships them ("measured kernels"), the nearest measured chip's ("transferred") where not;
  rows served by an engine placer has no tables for stay on the roofline. The summaries are per source and
  per engine. The end-to-end rows are the exam, never calibration input: the kernels are the textbook.

    PYTHONPATH=$PWD python bench/bench_fidelity.py --kernels-dir DIR   # tables from another directory
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
from pathlib import Path

from placer.catalog import KV_PRECISIONS, WEIGHT_PRECISIONS, get_chip, get_model
from placer.errors import PlacerError
from placer.estimate import estimate, instance
from placer.perfmodel import DECODE_STEP_OVERHEAD_S, KERNEL_KINDS
from placer.perfmodel.engines import ROOFLINE

CSV = Path(__file__).parent / "data" / "published_measurements.csv"
#: published name → the catalog model of identical architecture (the CSV's notes say so).
SAME_ARCHITECTURE = {"deepseek-r1": "deepseek-v3", "llama-3.3-70b": "llama-3.1-70b"}
DTYPE_ALIASES = {"fp16": "bf16", "": "bf16"}
#: a KV dtype the source does not state: "bf16" (the engines' default ``auto``) or "weights"
#: (the weight dtype: ModelOpt FP8 checkpoints can carry FP8 KV scales) — ``--unstated-kv``.
UNSTATED_KV = {"value": "bf16"}
EP_CHUNK_TOKENS_PER_GPU = 16384
DENSE_CHUNK_TOKENS = 8192


#: trtllm-bench's defaults (tensorrt_llm/bench: kv_cache_free_gpu_mem_fraction 0.90; the
#: scheduler's batch cap 4096, token cap 32768; at least 2048 tokens per forward).
TRTLLM_KV_FRACTION = 0.90
GIB = 1024 ** 3


class NotEvaluable(Exception):
    """A row whose published setting lacks what the model needs (the message says what)."""


#: words in a row's ``engine`` column → the engine whose tables placer reads (first match wins)
ENGINE_WORDS = (("sglang", "sglang"), ("tensorrt-llm", "trtllm"), ("trtllm", "trtllm"), ("vllm", "vllm"))


def row_engine(row: dict) -> str:
    """The engine that served the row (``sglang``, ``vllm``, ``trtllm``), else ``roofline`` (an engine
    placer has no tables for, e.g. DeepSeek's in-house one)."""
    text = row["engine"].lower()
    return next((engine for word, engine in ENGINE_WORDS if word in text), ROOFLINE)


def source_kind(source: str) -> str:
    """An estimate's ``source`` in one word: ``measured kernels``, ``transferred`` or ``roofline``."""
    if "transferred" in source:
        return "transferred"
    return "measured kernels" if "measured kernels" in source else "roofline"


def _int(text: str, field: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*", text or "")
    if not m:
        raise NotEvaluable(f"{field} {text!r} is not one number")
    return int(m.group(1))


def _kv_dtype(row: dict) -> str:
    kv = row["kv_dtype"].strip()
    if kv == "unstated":
        weights = DTYPE_ALIASES.get(row["weight_dtype"], row["weight_dtype"])
        return weights if UNSTATED_KV["value"] == "weights" else UNSTATED_KV["value"]
    return DTYPE_ALIASES.get(kv, kv)


def _round_up(x: float, step: int) -> int:
    return step * math.ceil(x / step)


def trtllm_bench_limits(model: str, chip: str, chips: int, kv_dtype: str, weight_dtype: str,
                        input_tokens: int, output_tokens: int) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) trtllm-bench's ``throughput`` picks when neither is given
    (NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py ``calc_engine_setting`` and
    ``finetune_setting``; benchmark/utils/general.py ``get_settings``).

    KV bytes/token as it counts them: 2 × layers × max(tp, kv_heads) × head_size × kv bytes, with
    the Hugging Face config's kv heads and head size (MLA configs: kv heads = heads, head size =
    hidden / heads); free memory = chips × device GiB − params × weight bytes; requests =
    0.90 × free / (bytes/token × (I + O)); batch = requests rounded up (to 32 below 256, min 64;
    to 128 below 1024; else to 256; at most 4096); tokens = requests × (1 + I/O) rounded up (to 256
    below 4096, min 2048; 512 below 8192; else 1024; at most 32768), and at least I + batch because
    chunked prefill is off by default. NVML reports the datasheet size in GiB (80 GB H100: 79.6 GiB).
    """
    m, c = get_model(model), get_chip(chip)
    kv_heads, head = (m.q_heads, m.hidden // m.q_heads) if m.attn == "mla" else (m.kv_heads, m.head_dim)
    per_token = 2 * m.layers * max(chips, kv_heads) * head * KV_PRECISIONS[kv_dtype].bytes_per_value
    free = chips * c.mem_gb - m.params_total_b * 1e9 * WEIGHT_PRECISIONS[weight_dtype].bytes_per_value / GIB
    requests = TRTLLM_KV_FRACTION * free * GIB / (per_token * (input_tokens + output_tokens))
    raw_bs = min(requests, 4096)
    raw_tokens = min(raw_bs * (1 + input_tokens / output_tokens), 32768)
    batch = (max(64, _round_up(raw_bs, 32)) if raw_bs < 256 else
             _round_up(raw_bs, 128) if raw_bs < 1024 else _round_up(raw_bs, 256))
    tokens = (max(2048, _round_up(raw_tokens, 256)) if raw_tokens < 4096 else
              _round_up(raw_tokens, 512) if raw_tokens < 8192 else _round_up(raw_tokens, 1024))
    return batch, max(tokens, input_tokens + batch)


def query(row: dict) -> dict:
    """The keyword arguments of :func:`estimate` and the derived setting for one CSV row."""
    if not row["chips_per_instance"].strip():
        raise NotEvaluable("chips per instance not stated")
    chips = _int(row["chips_per_instance"], "chips_per_instance")
    dp_attention = bool(re.search(r"\bdp\d*|\bdep\d*|dp-attention|dp\d+-attention", row["parallelism"]))
    batch_text = row["batch"].strip()
    batch, chunk = None, (EP_CHUNK_TOKENS_PER_GPU * chips if dp_attention else DENSE_CHUNK_TOKENS)
    if m := re.match(r"(\d+) tokens/GPU", batch_text):
        chunk = int(m.group(1)) * chips
    elif m := re.match(r"(\d+)( per instance)?", batch_text):
        if "prompts" not in batch_text:
            batch = int(m.group(1)) * (chips if dp_attention and not m.group(2) else 1)
    elif batch_text and not batch_text.startswith("engine-chosen"):
        raise NotEvaluable(f"batch {batch_text!r}")
    if m := re.search(r"max_num_tokens (\d+)", batch_text):  # the engine's forward budget, per rank with dp
        chunk = int(m.group(1)) * (chips if dp_attention else 1)
    metric = row["metric"]
    ctx, out = row["context_tokens"].strip(), row["output_tokens"].strip()
    if metric in ("decode_tokens_per_s_per_chip", "tpot_s") and not out:
        # decode at a stated KV length L: one request of I = L and O = 1 has its mean context at L
        inp, output = _int(ctx or row["input_tokens"], "context_tokens"), 1
    else:
        if not row["input_tokens"].strip():
            raise NotEvaluable("input length not stated")
        inp = _int(row["input_tokens"], "input_tokens")
        output = _int(out, "output_tokens") if out else 1
    if metric in ("decode_tokens_per_s_per_chip", "tpot_s") and batch is None:
        raise NotEvaluable("decode batch not stated")
    q = dict(
        model=SAME_ARCHITECTURE.get(row["model"], row["model"]), chip=row["chip"], tp=chips,
        weight_dtype=DTYPE_ALIASES.get(row["weight_dtype"], row["weight_dtype"]),
        kv_dtype=_kv_dtype(row),
        input_tokens=inp, output_tokens=output, hit_rate=float(row["hit_rate"] or 0.0),
        batch=batch, chunk_tokens=chunk, mtp_accept=float(row["mtp_accept"] or 1.0),
        shape="dep" if dp_attention else "pp" if re.search(r"\bpp\d", row["parallelism"]) else "tp",
    )
    if batch_text.startswith("engine-chosen") and "trtllm-bench throughput" in row["engine"]:
        cap, tokens = trtllm_bench_limits(q["model"], q["chip"], chips, q["kv_dtype"], q["weight_dtype"], inp, output)
        ranks = chips if dp_attention else 1  # with data-parallel attention each rank schedules its own
        q["batch_cap"], q["chunk_tokens"] = cap * ranks, tokens * ranks
    return q


def _estimate(q: dict):
    """The :class:`~placer.estimate.Estimate` of a query, its batch held to the engine's cap (``batch_cap``)."""
    args = {k: v for k, v in q.items() if k != "batch_cap"}
    try:
        e = estimate(**args)
        if q.get("batch_cap") and e.decode_batch > q["batch_cap"]:
            e = estimate(**{**args, "batch": q["batch_cap"]})
    except PlacerError as exc:
        raise NotEvaluable(str(exc)) from None
    return e


def predict(row: dict, engine: str = ROOFLINE) -> tuple[float, dict]:
    """(predicted value in the row's unit, the query) for one row under ``engine`` (the query's
    ``source`` says what answered)."""
    q = query(row)
    q["engine"] = engine
    e = _estimate(q)
    q["source"] = e.source
    chips, metric = q["tp"], row["metric"]
    if metric == "prefill_tokens_per_s_per_chip":
        return e.prefill_tokens_per_s / chips, q
    if metric == "decode_tokens_per_s_per_chip":
        return e.decode_tokens_per_s / chips, q
    if metric == "tpot_s":
        return e.decode_step_s / q["mtp_accept"], q
    if metric == "ttft_s":
        return e.ttft_s, q
    if metric == "throughput_output_tokens_per_s_per_chip":
        i, o = q["input_tokens"], q["output_tokens"]
        per_request_s = i / e.prefill_tokens_per_s + o / e.decode_tokens_per_s
        q["batch"] = e.decode_batch
        return o / per_request_s / chips, q
    raise NotEvaluable(f"metric {metric!r} has no prediction")


def throughput_budget(row: dict) -> dict:
    """Where the time of an offline-throughput row (``throughput_output_tokens_per_s_per_chip``) goes:
    instance-seconds per request, published against the model's and against two bounds made of what the
    model leaves out (issue 13). ``bench_fidelity.py --explain ID`` prints it.

    * ``published_s`` = O / (published × chips): the instance's time per request the figure implies.
    * ``prefill_s`` = I / P and ``decode_s`` = O × step / B, the model's (their sum gives the prediction);
      ``kernels``: the decode step's (compute s, memory s) per kind of kernel and its communication s.
    * ``serial_step_s``: the step with nothing overlapped — every kind of kernel's compute plus its memory
      time, plus the communication and the fixed overhead; the model's step takes max(compute, memory) per
      kind and hides MoE communication under compute, so this bounds it from above. ``serial_decode_s``
      = O × serial step / B.
    * ``lockstep_prefill_s``: with data-parallel attention the ranks meet at every MoE layer, so a step
      lasts as long as its slowest rank (TensorRT-LLM, docs/source/blogs/tech_blog/
      blog10_ADP_Balance_Strategy.md: "the iteration time is dominated by the slowest rank"). A prompt
      prefilled on one rank while the others only decode runs its rank-local work (dense GEMMs, attention,
      elementwise: share 1 − s of its prefill work) at one chip's rate, its routed experts (share s,
      :meth:`~placer.perfmodel.InstanceModel.routed_expert_work`) still over all N chips:
      I / P × ((1 − s)·N + s). The bound of prompts that never share a step across ranks; the model
      (prompts co-scheduled on every rank, what ADP balance enforces) is its other end. N = 1 without
      data-parallel attention.
    * ``bound_s`` = lockstep prefill + serial decode, and ``bound`` the per-chip figure it gives.
    """
    if row["metric"] != "throughput_output_tokens_per_s_per_chip":
        raise NotEvaluable(f"metric {row['metric']!r} has no throughput budget")
    q = query(row)
    e = _estimate(q)
    im, shape = instance(q["model"], q["chip"], q["tp"], q["weight_dtype"], q["kv_dtype"], q["chunk_tokens"],
                         q["mtp_accept"], shape=q["shape"])
    if im.pp > 1:
        raise NotEvaluable("pipeline stages: the budget covers one stage per instance")
    chips, i, o, b = q["tp"], q["input_tokens"], q["output_tokens"], e.decode_batch
    context = i + o / 2
    kernels = im.decode_kernels(b, 1 + im.draft_tokens, context)
    serial_step = sum(sum(kernels[k]) for k in KERNEL_KINDS) + kernels["communication"] + DECODE_STEP_OVERHEAD_S
    new = max(1.0, (1.0 - q["hit_rate"]) * i)
    work, _ = im.prefill_chunk_parts(i, i - new, new)
    share = im.routed_expert_work(new, max(new, im.prefill_chunk_tokens)) / work
    ranks = chips if shape.kind == "dep" else 1
    prefill = i / e.prefill_tokens_per_s
    out = {"published_s": o / (float(row["value"]) * chips), "prefill_s": prefill,
           "decode_s": o * e.decode_step_s / b / q["mtp_accept"], "step_s": e.decode_step_s, "batch": b,
           "kernels": kernels, "serial_step_s": serial_step,
           "serial_decode_s": o * serial_step / b / q["mtp_accept"], "expert_share": share, "ranks": ranks,
           "lockstep_prefill_s": prefill * ((1 - share) * ranks + share)}
    out["model_s"] = out["prefill_s"] + out["decode_s"]
    out["bound_s"] = out["lockstep_prefill_s"] + out["serial_decode_s"]
    out["predicted"], out["bound"] = o / (out["model_s"] * chips), o / (out["bound_s"] * chips)
    return out


def explain(row: dict) -> str:
    """:func:`throughput_budget` of one row, as lines of text (milliseconds of the instance per request)."""
    b, ms = throughput_budget(row), 1e3
    k = b["kernels"]
    kinds = ", ".join(f"{kind} {k[kind][0] * ms:.1f}/{k[kind][1] * ms:.1f}" for kind in KERNEL_KINDS)
    lines = [
        f"{row['id']}: ms of the instance per request (I {row['input_tokens']}, O {row['output_tokens']}, "
        f"B {b['batch']}, {b['ranks']} data-parallel rank(s))",
        f"  published                        {b['published_s'] * ms:8.1f}   ({float(row['value']):.4g} tok/s/chip)",
        f"  model   prefill I/P              {b['prefill_s'] * ms:8.1f}",
        f"          decode O*step/B          {b['decode_s'] * ms:8.1f}   step {b['step_s'] * ms:.1f}: {kinds} "
        f"(compute/memory), communication {k['communication'] * ms:.1f}",
        f"          total                    {b['model_s'] * ms:8.1f}   ({b['predicted']:.4g} tok/s/chip, "
        f"published / model time {b['published_s'] / b['model_s']:.2f})",
        f"  decode with nothing overlapped   {b['serial_decode_s'] * ms:8.1f}   step {b['serial_step_s'] * ms:.1f}",
        f"  prefill never co-scheduled       {b['lockstep_prefill_s'] * ms:8.1f}   (routed experts "
        f"{b['expert_share']:.2f} of the prompt's work)",
        f"  both bounds                      {b['bound_s'] * ms:8.1f}   ({b['bound']:.4g} tok/s/chip, "
        f"published / bound time {b['published_s'] / b['bound_s']:.2f})",
    ]
    return "\n".join(lines)


def _setting(q: dict) -> str:
    b = f" B{q['batch']}" if q.get("batch") else ""
    mtp = f" mtp{q['mtp_accept']:g}" if q["mtp_accept"] != 1.0 else ""
    shape = f"-{q['shape']}" if q.get("shape", "tp") != "tp" else ""
    return f"tp{q['tp']}{shape} {q['weight_dtype']}/{q['kv_dtype']} {q['input_tokens']}/{q['output_tokens']}{b}{mtp}"


def evaluate(path: Path = CSV, engines: bool = True) -> tuple[list[dict], list[tuple[str, str]]]:
    """(evaluated rows, [(id, why not)]) for every row of ``path``: ``predicted`` / ``ratio`` with the
    roofline, and (``engines``) ``engine_predicted`` / ``engine_ratio`` with the row's engine, its
    ``source`` (measured kernels / transferred / roofline) and ``engine_source`` in full."""
    done, skipped = [], []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                pred, q = predict(row)
            except NotEvaluable as exc:
                skipped.append((row["id"], str(exc)))
                continue
            pub = float(row["value"])
            out = {"id": row["id"], "model": q["model"], "chip": row["chip"], "setting": _setting(q),
                   "metric": row["metric"], "published": pub, "predicted": pred, "ratio": pred / pub,
                   "fair": row["fair"].strip() == "yes", "engine": row_engine(row)}
            if engines:
                engine_pred, eq = (pred, q) if out["engine"] == ROOFLINE else predict(row, out["engine"])
                out.update(engine_predicted=engine_pred, engine_ratio=engine_pred / pub,
                           engine_source=eq["source"], source=source_kind(eq["source"]))
            done.append(out)
    return done, skipped


def summary(rows: list[dict], key: str = "ratio") -> dict:
    """Median and worst |ln(predicted/published)| (``key``: ``ratio``, the roofline's, or ``engine_ratio``),
    also as factors."""
    errs = [abs(math.log(r[key])) for r in rows]
    if not errs:
        return {"n": 0}
    med, worst = statistics.median(errs), max(errs)
    return {"n": len(errs), "median_abs_ln": med, "worst_abs_ln": worst,
            "median_factor": math.exp(med), "worst_factor": math.exp(worst)}


def engine_summaries(rows: list[dict]) -> dict[str, dict]:
    """:func:`summary` of each row under its engine, over the fair and all rows, per source and per
    engine, each with the roofline's figures on the same rows."""
    groups: dict[str, list[dict]] = {"fair rows, each with its engine": [r for r in rows if r["fair"]],
                                     "all rows, each with its engine": rows}
    for r in rows:
        groups.setdefault(f"source: {r['source']}", []).append(r)
        groups.setdefault(f"engine: {r['engine']}", []).append(r)
        if r["fair"]:
            groups.setdefault(f"fair, source: {r['source']}", []).append(r)
            groups.setdefault(f"fair, engine: {r['engine']}", []).append(r)
    out = {}
    for name, members in groups.items():
        s = summary(members, "engine_ratio")
        if s["n"]:
            base = summary(members)
            s.update(roofline_median_factor=base["median_factor"], roofline_worst_factor=base["worst_factor"])
        out[name] = s
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--json", action="store_true", help="print rows and summaries as JSON")
    ap.add_argument("--unstated-kv", choices=("bf16", "fp8", "weights"), default="bf16",
                    help="KV dtype where the source does not state it (default bf16, the engines' default)")
    ap.add_argument("--explain", metavar="ID", action="append", default=[],
                    help="print where an offline-throughput row's time goes (throughput_budget) instead of the table")
    ap.add_argument("--roofline-only", action="store_true", help="only the roofline (the table before issue 41)")
    ap.add_argument("--kernels-dir", type=Path, default=None,
                    help="read the measured kernel tables from this directory (default: placer/kernels/data)")
    args = ap.parse_args(argv)
    UNSTATED_KV["value"] = args.unstated_kv
    if args.kernels_dir is not None:
        import placer.kernels.tables as kernel_tables
        kernel_tables.DATA_DIR = args.kernels_dir
    if args.explain:
        with open(args.csv, newline="") as fh:
            by_id = {r["id"]: r for r in csv.DictReader(fh)}
        for rid in args.explain:
            if rid not in by_id:
                ap.error(f"no row {rid!r} in {args.csv}")
            try:
                print(explain(by_id[rid]))
            except NotEvaluable as exc:
                print(f"{rid}: no budget: {exc}")
        return 0
    rows, skipped = evaluate(args.csv, engines=not args.roofline_only)
    fair, every = summary([r for r in rows if r["fair"]]), summary(rows)
    groups = {} if args.roofline_only else engine_summaries(rows)
    if args.json:
        print(json.dumps({"rows": rows, "fair": fair, "all": every, "by_source_and_engine": groups,
                          "not_evaluated": skipped}, indent=2))
        return 0
    head = f"{'id':40} {'model':15} {'chip':13} {'setting':36} {'metric':40} {'published':>10} " \
           f"{'predicted':>10} {'ratio':>6} fair"
    if not args.roofline_only:
        head += f" {'engine':8} {'source':16} {'e.pred':>10} {'e.ratio':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = f"{r['id']:40} {r['model']:15} {r['chip']:13} {r['setting']:36} {r['metric']:40} " \
               f"{r['published']:10.4g} {r['predicted']:10.4g} {r['ratio']:6.2f} {'yes' if r['fair'] else 'no ':3}"
        if not args.roofline_only:
            line += f" {r['engine']:8} {r['source']:16} {r['engine_predicted']:10.4g} {r['engine_ratio']:7.2f}"
        print(line)
    print("roofline only (as before issue 41):")
    for name, s in (("fair rows", fair), ("all evaluated rows", every)):
        if s["n"]:
            print(f"  {name} ({s['n']}): median |ln ratio| {s['median_abs_ln']:.3f} (factor {s['median_factor']:.2f}),"
                  f" worst {s['worst_abs_ln']:.3f} (factor {s['worst_factor']:.2f})")
    if groups:
        print("each row with its engine (measured kernels where covered, transferred where not):")
        for name, s in groups.items():
            if s["n"]:
                print(f"  {name:44} ({s['n']:2}): median factor {s['median_factor']:.2f}, worst {s['worst_factor']:.2f}"
                      f"   [roofline on the same rows: {s['roofline_median_factor']:.2f} / {s['roofline_worst_factor']:.2f}]")
    print("targets (issue 41, fair rows): median factor <= 1.10, worst <= 1.50")
    for rid, why in skipped:
        print(f"not evaluated: {rid}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
