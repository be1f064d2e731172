#!/usr/bin/env bash
# The one prepared GPU check: the full chip profile on cuda:0 and the Triton kernel
# benchmarks, everything written under $OUT (summary.json + logs), in under 4 minutes.
#
#   OUT=/tmp/gpu bash bench/gpu_check.sh        # on the GPU machine (device tool: $OUT is set)
#
# Needs only python3 with torch and triton (no pydantic, typer or rich): the profile runs
# through `python3 -m profiler.run`, which writes the ChipProfile JSON as plain data; load
# it here with `placer.profiles.records.ChipProfile.load` (which re-checks every roofline).
# Files under $OUT: nvidia-smi.txt, profile.json, profile.log, kernels.json, kernels.log,
# summary.json (6 files: the device tool brings back at most 8).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out/gpu_check}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
PROFILE_DEVICE="${PROFILE_DEVICE:-cuda:0}"   # cpu for a dry run of this script off the GPU
KERNEL_DEVICE="${KERNEL_DEVICE:-cuda}"
PROFILE_ARGS="${PROFILE_ARGS:-}"           # e.g. --quick
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
T0=$(date +%s)

{ nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; } \
  >"$OUT/nvidia-smi.txt" 2>&1

echo "== chip profile ($PROFILE_DEVICE) =="
timeout 120 "$PY" -m profiler.run --device "$PROFILE_DEVICE" $PROFILE_ARGS --out "$OUT/profile.json" 2>&1 | tee "$OUT/profile.log"
PROFILE_RC=${PIPESTATUS[0]}
echo "profile exit code: $PROFILE_RC  ($(( $(date +%s) - T0 )) s so far)"

echo "== kernel benchmarks =="
timeout 95 "$PY" bench/bench_kernels.py --device "$KERNEL_DEVICE" --json-out "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.log"
KERNELS_RC=${PIPESTATUS[0]}
echo "kernels exit code: $KERNELS_RC  ($(( $(date +%s) - T0 )) s so far)"

"$PY" - "$OUT" "$PROFILE_RC" "$KERNELS_RC" "$T0" <<'PYEOF'
import json, os, sys, time
out, profile_rc, kernels_rc, t0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def load(name):
    try:
        with open(os.path.join(out, name)) as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
profile, kernels = load("profile.json"), load("kernels.json")
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
}
with open(os.path.join(out, "summary.json"), "w") as fh:
    json.dump(summary, fh, indent=2)
print(json.dumps({k: summary[k] for k in ("profile_rc", "kernels_rc", "wall_s", "efficiency")}, indent=2))
PYEOF
echo "total $(( $(date +%s) - T0 )) s"
exit $(( PROFILE_RC != 0 || KERNELS_RC != 0 ))
