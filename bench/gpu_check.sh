#!/usr/bin/env bash
# The one prepared GPU check: the full chip profile on cuda:0, the Triton kernel benchmarks and
# (issue 13 part 5) `placer estimate` against our own engine's measured times, everything written
# under $OUT (summary.json + logs), in a few minutes.
#
#   OUT=/tmp/gpu bash bench/gpu_check.sh        # on the GPU machine (device tool: $OUT is set)
#
# Needs only python3 with torch and triton (no pydantic, typer or rich): the profile runs
# through `python3 -m profiler.run`, which writes the ChipProfile JSON as plain data; load
# it here with `placer.profiles.records.ChipProfile.load` (which re-checks every roofline).
# Engine vs model: when `placer profile model` exists it measures our engine (executor + Triton
# kernels, random weights) for a dense 8B-class and a 1B-class shape (MODELS); every measured
# point is then predicted by the roofline path of placer.perfmodel with the chip profile just
# measured (efficiencies only, no tables) and summary.json["estimate_vs_measured"] lists
# predicted / measured per point with the median and worst error (target: within 15 %).
# Serving (issue 15 part 5): the gpu-marked checkpoint parity tests (bf16 Triton vs transformers
# fp32) into check.log, then bench/bench_gpu_serve.py — `placer deploy --model-dir` of a random
# SERVE_MODEL checkpoint with the Triton and the torch backend at SERVE_LOADS concurrent clients,
# transformers generate as the floor, `placer estimate` beside the measured TTFT/TPOT — into
# serve.json (SERVE=0 skips both; SERVE_TIMEOUT_S bounds the bench).
# Files under $OUT: nvidia-smi.txt, profile.json, kernels.json, check.log, model-<M>.json per
# model, serve.json, summary.json (8 files: the device tool brings back at most 8).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out/gpu_check}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
PROFILE_DEVICE="${PROFILE_DEVICE:-cuda:0}"   # cpu for a dry run of this script off the GPU
KERNEL_DEVICE="${KERNEL_DEVICE:-cuda}"
PROFILE_ARGS="${PROFILE_ARGS:-}"           # e.g. --quick
MODELS="${MODELS:-llama-3.1-8b llama-3.2-1b}"
MODEL_TIMEOUT_S="${MODEL_TIMEOUT_S:-120}"
SERVE="${SERVE:-1}"
SERVE_MODEL="${SERVE_MODEL:-llama-3.2-1b}"
SERVE_LOADS="${SERVE_LOADS:-1,8}"
SERVE_TIMEOUT_S="${SERVE_TIMEOUT_S:-300}"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
T0=$(date +%s)

{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; } \
  >"$OUT/nvidia-smi.txt" 2>&1

echo "== chip profile ($PROFILE_DEVICE) =="
timeout 120 "$PY" -m profiler.run --device "$PROFILE_DEVICE" $PROFILE_ARGS --out "$OUT/profile.json" 2>&1 | tee "$OUT/check.log"
PROFILE_RC=${PIPESTATUS[0]}
echo "profile exit code: $PROFILE_RC  ($(( $(date +%s) - T0 )) s so far)"

echo "== kernel benchmarks =="
timeout 95 "$PY" bench/bench_kernels.py --device "$KERNEL_DEVICE" --json-out "$OUT/kernels.json" 2>&1 | tee -a "$OUT/check.log"
KERNELS_RC=${PIPESTATUS[0]}
echo "kernels exit code: $KERNELS_RC  ($(( $(date +%s) - T0 )) s so far)"

echo "== engine model profiles ($MODELS) =="
if "$PY" -m placer.cli profile model --help >/dev/null 2>&1; then
  for M in $MODELS; do
    timeout "$MODEL_TIMEOUT_S" "$PY" -m placer.cli profile model --device "$KERNEL_DEVICE" --model "$M" --tp 1 \
      --out "$OUT/model-$M.json" 2>&1 | tee -a "$OUT/check.log"
    echo "profile model $M exit code: ${PIPESTATUS[0]}  ($(( $(date +%s) - T0 )) s so far)"
  done
else
  echo "placer profile model is not available here: engine-vs-model comparison skipped" | tee -a "$OUT/check.log"
fi

SERVE_MISSING=$("$PY" bench/bench_gpu_serve.py --check-deps 2>&1)
if [ "$SERVE" = "1" ] && [ -n "$SERVE_MISSING" ]; then
  echo "serving bench and checkpoint parity skipped: $SERVE_MISSING" | tee -a "$OUT/check.log"
elif [ "$SERVE" = "1" ]; then
  echo "== checkpoint parity on the GPU (bf16 Triton vs transformers fp32) =="
  timeout 180 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/executor/engine/test_hf_gpu.py 2>&1 \
    | tail -5 | tee -a "$OUT/check.log"
  echo "== serving: placer deploy --model-dir ($SERVE_MODEL, loads $SERVE_LOADS) =="
  timeout "$SERVE_TIMEOUT_S" "$PY" bench/bench_gpu_serve.py --model "$SERVE_MODEL" --loads "$SERVE_LOADS" \
    --requests 8 --input 512 --output 64 --json "$OUT/serve.json" 2>&1 | tail -20 | tee -a "$OUT/check.log"
  echo "serve bench exit code: ${PIPESTATUS[0]}  ($(( $(date +%s) - T0 )) s so far)"
fi

"$PY" - "$OUT" "$PROFILE_RC" "$KERNELS_RC" "$T0" <<'PYEOF'
import glob, json, math, os, statistics, sys, time
out, profile_rc, kernels_rc, t0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def _num(rec, *keys):
    for k in keys:
        if rec.get(k) is not None:
            return float(rec[k])
    return None


def estimate_vs_measured(chip_profile_path):
    """Each measured engine point of model-*.json beside the roofline path's prediction."""
    try:
        from placer.catalog import get_model
        from placer.estimate import instance
    except Exception as exc:  # planner deps missing on this machine
        return {"error": f"placer not importable: {exc}"}
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "model-*.json"))):
        try:
            prof = json.load(open(path))
        except (OSError, ValueError) as exc:
            rows.append({"file": os.path.basename(path), "error": str(exc)})
            continue
        model, chip = prof.get("model"), prof.get("chip") or "H200-SXM"
        profiles = chip_profile_path if os.path.exists(chip_profile_path) else None
        try:
            get_model(model)
            im, source = instance(model, chip, int(prof.get("tp", 1)), prof.get("weight_dtype") or "bf16",
                                  prof.get("kv_dtype") or "bf16", profiles=profiles)
        except Exception as exc:
            rows.append({"file": os.path.basename(path), "error": f"{type(exc).__name__}: {exc}"})
            continue
        points = prof.get("measurements") or prof.get("points") or prof.get("rows") or []
        for p in points:
            phase = p.get("phase") or p.get("kind")
            measured = _num(p, "seconds", "latency_s", "median_s", "time_s")
            context = _num(p, "context", "context_tokens") or 0.0
            if not measured:
                continue
            if phase == "prefill":
                tokens = _num(p, "tokens", "new_tokens", "input_tokens")
                predicted = im.prefill_chunk_s(context + tokens, context, tokens)
            elif phase == "decode":
                predicted = im.step_s(_num(p, "batch"), context)
            else:
                continue
            rows.append({"model": model, "phase": phase, "point": {k: p.get(k) for k in ("tokens", "batch", "context")},
                         "measured_s": measured, "predicted_s": predicted, "ratio": predicted / measured,
                         "source": source})
    errs = [abs(math.log(r["ratio"])) for r in rows if "ratio" in r]
    return {"rows": rows, "n": len(errs),
            "median_factor": math.exp(statistics.median(errs)) if errs else None,
            "worst_factor": math.exp(max(errs)) if errs else None, "target_factor": 1.15}

def load(name):
    try:
        with open(os.path.join(out, name)) as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
profile, kernels, serve = load("profile.json"), load("kernels.json"), load("serve.json")
summary = {
    "profile_rc": profile_rc, "kernels_rc": kernels_rc, "wall_s": time.time() - t0,
    "provenance": profile.get("provenance"), "chip": profile.get("chip"),
    "summary": profile.get("summary"), "efficiency": profile.get("efficiency"),
    "skipped": profile.get("skipped"), "roofline_violations": profile.get("roofline_violations"),
    "measurements": [
        {k: m.get(k) for k in ("dimension", "name", "unit", "median", "spread_rel", "roofline")}
        | {"fraction_of_roofline": (m["median"] / m["roofline"]) if m.get("roofline") else None}
        for m in profile.get("measurements", [])
    ],
    "kernels": {"device": kernels.get("device"), "torch": kernels.get("torch"), "triton": kernels.get("triton"),
                "error": kernels.get("error"),
                "rows": [{k: r.get(k) for k in ("kernel", "shape", "ms", "gb_per_s", "frac_peak_bw", "tflop_per_s",
                                                 "ratio_to_baseline", "max_abs_err", "error")}
                         for r in kernels.get("rows", [])]},
    "estimate_vs_measured": estimate_vs_measured(os.path.join(out, "profile.json")),
    "serve": serve,
}
with open(os.path.join(out, "summary.json"), "w") as fh:
    json.dump(summary, fh, indent=2)
print(json.dumps({k: summary[k] for k in ("profile_rc", "kernels_rc", "wall_s", "efficiency")}, indent=2))
ev = summary["estimate_vs_measured"]
for r in ev.get("rows", []):
    if "ratio" in r:
        print(f"{r['model']:14} {r['phase']:8} {json.dumps(r['point']):48} measured {r['measured_s']:.5f} s "
              f"predicted {r['predicted_s']:.5f} s ratio {r['ratio']:.2f}")
    else:
        print(r)
if ev.get("n"):
    print(f"engine vs roofline path: {ev['n']} points, median factor {ev['median_factor']:.3f}, "
          f"worst {ev['worst_factor']:.3f} (target {ev['target_factor']})")
PYEOF
echo "total $(( $(date +%s) - T0 )) s"
exit $(( PROFILE_RC != 0 || KERNELS_RC != 0 ))
