#!/usr/bin/env bash
# The one prepared GPU check: the full chip profile on cuda:0, the Triton kernel benchmarks and
# (issue 13 part 5) `placer estimate` against our own engine's measured times, everything written
# under $OUT (summary.json + logs), in a few minutes.
#
#   OUT=/tmp/gpu bash bench/gpu_check.sh        # on the GPU machine (device tool: $OUT is set)
#
# The device image has torch, triton, typer and rich but not pydantic, which placer's estimate needs:
# run `bash bench/gpu_wheels.sh` here first and carry ".whl" in the device call (2.7 MB).
#
# The chip profile and the kernel benchmarks need only torch and triton: the profile runs through
# `python3 -m profiler.run`, which writes the ChipProfile JSON as plain data; load it here with
# `placer.profiles.records.ChipProfile.load` (which re-checks every roofline).
# Engine vs model (issue 13 part 5): bench/bench_engine_estimate.py per model of MODELS (a dense
# 8B-class and a 1B-class shape, the catalog's, random weights): `placer profile model` on the
# MODEL_GRID grid, then every grid point and every point between them timed again, each predicted
# by the roofline path (this run's chip profile: efficiencies only) and by the table path (the
# measured table); model-<M>.json holds the table, the points and the summary; summary.json
# ["estimate_vs_measured"] the per-path median and worst factor against the targets (roofline
# 15 %, table 5 % at grid points, 10 % between them).
# Serving (issue 15 part 5): the gpu-marked checkpoint parity tests (bf16 Triton vs transformers
# fp32) into check.log, then bench/bench_gpu_serve.py — `placer deploy --model-dir` of a random
# SERVE_MODEL checkpoint with the Triton and the torch backend at SERVE_LOADS concurrent clients,
# transformers generate as the floor, `placer estimate` beside the measured TTFT/TPOT — into
# serve.json (SERVE=0 skips both; SERVE_TIMEOUT_S bounds the bench).
# Kernel paths (issue 41 part 7): bench/bench_kernel_paths.py predicts every point our engine timed with
# the roofline and with each engine's measured kernels (sglang, vllm, trtllm; the chip's own tables or
# transferred) — summary.json["kernel_paths"], per model and path: median and worst factor, sources.
# Handoff (issue 48 part 2): bench/bench_handoff_jitter.py --alone-only --device cuda, the PDD report's
# microbenchmark (100 tokens: wire, wait at MD, extend-decode mean/max/std) with the torch and the Triton
# backend — summary.json["handoff"].
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
MODEL_TIMEOUT_S="${MODEL_TIMEOUT_S:-240}"
MODEL_GRID="${MODEL_GRID:-gpu}"             # profiler.model.GRIDS: gpu fits an 8B model on an 80 GB card
MODEL_REPS="${MODEL_REPS:-5}"
MODEL_ARGS="${MODEL_ARGS:-}"               # e.g. --tiny (with MODEL_GRID=tiny) for a dry run on the CPU
SERVE="${SERVE:-1}"
SERVE_MODEL="${SERVE_MODEL:-llama-3.2-1b}"
SERVE_LOADS="${SERVE_LOADS:-1,8}"
SERVE_TIMEOUT_S="${SERVE_TIMEOUT_S:-300}"
T0=$(date +%s)
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then  # bench/gpu_wheels.sh's, carried: what the image lacks
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

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

echo "== our engine vs placer estimate ($MODELS, grid $MODEL_GRID) =="
for M in $MODELS; do
  timeout "$MODEL_TIMEOUT_S" "$PY" bench/bench_engine_estimate.py --device "$KERNEL_DEVICE" --model "$M" \
    --grid "$MODEL_GRID" --reps "$MODEL_REPS" --chip-profile "$OUT/profile.json" --json "$OUT/model-$M.json" \
    $MODEL_ARGS 2>&1 | tee -a "$OUT/check.log"
  echo "engine vs estimate $M exit code: ${PIPESTATUS[0]}  ($(( $(date +%s) - T0 )) s so far)"
done

echo "== our engine's forwards vs the roofline and the engines' measured kernels (issue 41) =="
rm -f /tmp/kernel-paths.json
ls "$OUT"/model-*.json >/dev/null 2>&1 && timeout 60 "$PY" bench/bench_kernel_paths.py "$OUT"/model-*.json \
  --json /tmp/kernel-paths.json 2>&1 | tee -a "$OUT/check.log"

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

echo "== the token-ID handoff alone (issue 48): 100 tokens at a 1500-token context, extend-decode on the GPU =="
rm -f /tmp/handoff.json
for B in torch triton; do
  timeout 120 "$PY" bench/bench_handoff_jitter.py --alone-only --device cuda --backend "$B" --reps 50 \
    --json "/tmp/handoff-$B.json" 2>&1 | tail -7 | tee -a "$OUT/check.log"
done
"$PY" -c 'import json,os,sys; json.dump({b: json.load(open(f"/tmp/handoff-{b}.json")) for b in ("torch","triton")
  if os.path.exists(f"/tmp/handoff-{b}.json")}, open("/tmp/handoff.json","w"))'

"$PY" - "$OUT" "$PROFILE_RC" "$KERNELS_RC" "$T0" <<'PYEOF'
import glob, json, os, sys, time
out, profile_rc, kernels_rc, t0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def estimate_vs_measured():
    """Per model of bench_engine_estimate.py: its summary (per path: points, median and worst factor, target)."""
    out_rows = {}
    for path in sorted(glob.glob(os.path.join(out, "model-*.json"))):
        name = os.path.basename(path)[len("model-"):-len(".json")]
        try:
            with open(path) as fh:
                result = json.load(fh)
            out_rows[name] = {"chip": result["chip"], "engine": result["engine"], "summary": result["summary"]}
        except (OSError, ValueError, KeyError) as exc:
            out_rows[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out_rows

def load(name):
    try:
        with open(os.path.join(out, name)) as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
profile, kernels, serve = load("profile.json"), load("kernels.json"), load("serve.json")
kernel_paths = load("/tmp/kernel-paths.json")  # bench_kernel_paths.py's (absolute path: os.path.join keeps it)
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
    "estimate_vs_measured": estimate_vs_measured(),
    "serve": serve,
    "kernel_paths": kernel_paths,
    "handoff": load("/tmp/handoff.json"),  # bench_handoff_jitter.py --alone-only per backend (ms)
}
with open(os.path.join(out, "summary.json"), "w") as fh:
    json.dump(summary, fh, indent=2)
print(json.dumps({k: summary[k] for k in ("profile_rc", "kernels_rc", "wall_s", "efficiency")}, indent=2))
for model, ev in summary["estimate_vs_measured"].items():
    if "error" in ev:
        print(f"engine vs estimate {model}: {ev['error']}")
        continue
    for path, s in ev["summary"].items():
        if s["n"]:
            print(f"engine vs estimate {model} ({ev['chip']}), {path}: {s['n']} points, median factor "
                  f"{s['median_factor']:.3f}, worst {s['worst_factor']:.3f} (target {s['target_factor']})")
PYEOF
echo "total $(( $(date +%s) - T0 )) s"
exit $(( PROFILE_RC != 0 || KERNELS_RC != 0 ))
