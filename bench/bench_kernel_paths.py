"""Our own engine's measured forwards against the roofline and the measured-kernel paths (issue 41, part 7).

    python bench/bench_kernel_paths.py OUT/model-*.json [--json PATH]

in:  the files ``bench/bench_engine_estimate.py --json`` writes on a GPU (each: the profile with its
     measured table, the chip, and every timed point: phase, tokens or batch, context, measured seconds)
out: per file and per path — ``roofline`` (the datasheet × catalog efficiencies) and each engine's
     measured kernels (``sglang``, ``vllm``, ``trtllm``: the chip's own tables, or transferred from the
     nearest measured chip) — the median and worst factor max(p/m, m/p) against our engine's measured
     seconds, and the sources that answered. Nothing is fitted: the kernels are the engines', the
     forwards ours; a large factor says how far our engine's kernels are from the engine's.

No device is needed to run it (``bench/gpu_check.sh`` runs it after the model bench on the GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine_estimate import chip_of, model_of  # noqa: E402

from placer.perfmodel.engines import engine_model  # noqa: E402
from placer.profiles.measured import source_of_prefill, source_of_step  # noqa: E402
from placer.shapes import Shape, shape_model  # noqa: E402

PATHS = ("roofline", "sglang", "vllm", "trtllm")


def compare(result: dict) -> dict:
    """Per path: points, median and worst factor, and the sources that answered."""
    profile = result["profile"]
    model, chip = model_of(profile["tables"][0]), chip_of(profile)
    base = shape_model(Shape(1), chip, model, "bf16", "bf16")
    out = {"model": result.get("model"), "chip": chip.name}
    for path in PATHS:
        im = engine_model(base, path)
        factors, sources = [], set()
        for p in result["points"]:
            context = p["context"]
            if p["phase"] == "prefill":
                size = p["tokens"]
                predicted = im.prefill_chunk_s(context + size, context, size)
                sources.add(source_of_prefill(im, context, size))
            else:
                size = p["batch"]
                predicted = im.step_s(size, context)
                sources.add(source_of_step(im, size, context))
            factors.append(math.exp(abs(math.log(predicted / p["measured_s"]))))
        out[path] = {"n": len(factors), "median_factor": statistics.median(factors) if factors else None,
                     "worst_factor": max(factors) if factors else None, "sources": sorted(sources)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, default=None, help="write the comparison here")
    args = ap.parse_args(argv)
    results = {}
    for path in args.files:
        try:
            results[path.name] = compare(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError) as exc:
            results[path.name] = {"error": f"{type(exc).__name__}: {exc}"}
    for name, r in results.items():
        if "error" in r:
            print(f"{name}: {r['error']}")
            continue
        for p in PATHS:
            s = r[p]
            if s["n"]:
                print(f"{name} ({r['chip']}) {p:8}: {s['n']} points, median factor {s['median_factor']:.3f}, "
                      f"worst {s['worst_factor']:.3f}; {' | '.join(s['sources'])}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
