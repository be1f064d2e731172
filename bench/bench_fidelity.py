"""The performance model against published serving measurements: predicted vs published.

    PYTHONPATH=$PWD python bench/bench_fidelity.py [--csv bench/data/published_measurements.csv] [--json]

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
from placer.estimate import estimate

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


def predict(row: dict) -> tuple[float, dict]:
    """(predicted value in the row's unit, the query) for one row."""
    q = query(row)
    try:
        e = estimate(**{k: v for k, v in q.items() if k != "batch_cap"})
        if q.get("batch_cap") and e.decode_batch > q["batch_cap"]:
            e = estimate(**{**{k: v for k, v in q.items() if k != "batch_cap"}, "batch": q["batch_cap"]})
    except PlacerError as exc:
        raise NotEvaluable(str(exc)) from None
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


def _setting(q: dict) -> str:
    b = f" B{q['batch']}" if q.get("batch") else ""
    mtp = f" mtp{q['mtp_accept']:g}" if q["mtp_accept"] != 1.0 else ""
    shape = f"-{q['shape']}" if q.get("shape", "tp") != "tp" else ""
    return f"tp{q['tp']}{shape} {q['weight_dtype']}/{q['kv_dtype']} {q['input_tokens']}/{q['output_tokens']}{b}{mtp}"


def evaluate(path: Path = CSV) -> tuple[list[dict], list[tuple[str, str]]]:
    """(evaluated rows, [(id, why not)]) for every row of ``path``."""
    done, skipped = [], []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                pred, q = predict(row)
            except NotEvaluable as exc:
                skipped.append((row["id"], str(exc)))
                continue
            pub = float(row["value"])
            done.append({"id": row["id"], "model": q["model"], "chip": row["chip"], "setting": _setting(q),
                         "metric": row["metric"], "published": pub, "predicted": pred, "ratio": pred / pub,
                         "fair": row["fair"].strip() == "yes"})
    return done, skipped


def summary(rows: list[dict]) -> dict:
    """Median and worst |ln(predicted/published)|, also as factors."""
    errs = [abs(math.log(r["ratio"])) for r in rows]
    if not errs:
        return {"n": 0}
    med, worst = statistics.median(errs), max(errs)
    return {"n": len(errs), "median_abs_ln": med, "worst_abs_ln": worst,
            "median_factor": math.exp(med), "worst_factor": math.exp(worst)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--json", action="store_true", help="print rows and summaries as JSON")
    ap.add_argument("--unstated-kv", choices=("bf16", "fp8", "weights"), default="bf16",
                    help="KV dtype where the source does not state it (default bf16, the engines' default)")
    args = ap.parse_args(argv)
    UNSTATED_KV["value"] = args.unstated_kv
    rows, skipped = evaluate(args.csv)
    fair, every = summary([r for r in rows if r["fair"]]), summary(rows)
    if args.json:
        print(json.dumps({"rows": rows, "fair": fair, "all": every, "not_evaluated": skipped}, indent=2))
        return 0
    head = f"{'id':40} {'model':15} {'chip':13} {'setting':36} {'metric':40} {'published':>10} " \
           f"{'predicted':>10} {'ratio':>6} fair"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['id']:40} {r['model']:15} {r['chip']:13} {r['setting']:36} {r['metric']:40} "
              f"{r['published']:10.4g} {r['predicted']:10.4g} {r['ratio']:6.2f} {'yes' if r['fair'] else 'no'}")
    for name, s in (("fair rows", fair), ("all evaluated rows", every)):
        if s["n"]:
            print(f"{name} ({s['n']}): median |ln ratio| {s['median_abs_ln']:.3f} (factor {s['median_factor']:.2f}),"
                  f" worst {s['worst_abs_ln']:.3f} (factor {s['worst_factor']:.2f})")
    print("targets (issue 13, fair rows): median factor <= 1.15, worst <= 1.50")
    for rid, why in skipped:
        print(f"not evaluated: {rid}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
