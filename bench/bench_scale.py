"""Planning at fleet scale: time to a first plan and to a 5 / 2 / 1 % certified gap, and peak memory.

    PYTHONPATH=. .venv/bin/python bench/bench_scale.py [--sizes 16x12,32x12,100x12] [--examples pdd-two-dc,sixteen-dc]
        [--repeats 3] [--time-limit 60] [--chips-per-site 2] [--link-density 0.05] [--seed 0]

Each size is a generated scenario (:mod:`bench.scale_scenarios`: SITESxCLASSES, DeepSeek-V3.2 FP8,
tp 8/16/32, a ring plus random chords, 7.5 req/s per site); each example a bundled
``examples/*.yaml``. Every run is ``optimize`` (bcr, no marginal values) in its own process, so its
peak memory (ru_maxrss, with its guarded solver children's: :mod:`placer.ilp.guard`) is its own; its progress
callback (:class:`placer.ilp.config.Progress`) gives the wall-clock seconds from the call (build included) at
which the first plan existed and at which the certified gap first reached 5, 2 and 1 %
("-" when it never did within ``--time-limit``). Prints per case the medians over ``--repeats``, the
model's size (columns, integer columns, rows), the final status, gap and BCR.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
GAPS = (0.05, 0.02, 0.01)


def run_one(case: str, time_limit_s: float, chips_per_site: int, link_density: float, seed: int) -> dict:
    """One solve in this process: its milestones, size, status and peak memory."""
    from placer.ilp.config import SolveConfig
    from placer.optimize import optimize
    from placer.problem import resolve
    from placer.specs import load_scenario, parse_scenario

    from bench.scale_scenarios import scale_scenario

    if "x" in case and case.split("x")[0].isdigit():
        sites, classes = (int(v) for v in case.split("x"))
        scenario = parse_scenario(scale_scenario(sites, classes, chips_per_site, link_density, seed))
    else:
        scenario = load_scenario(HERE / "examples" / f"{case}.yaml")
    start = time.perf_counter()
    marks: dict[str, float] = {}

    def seen(progress) -> None:
        # the bench's own clock from the call: a report's elapsed_s counts from its solve's start, after
        # the model's build (100 sites x 12 classes: 20-55 s), and the local plan's before it
        now = time.perf_counter() - start
        if progress.incumbent is not None:
            marks.setdefault("first", now)
            for gap in GAPS:
                if progress.gap <= gap:
                    marks.setdefault(f"{100 * gap:g}%", now)

    out = {"case": case}
    try:
        plan = optimize(resolve(scenario), SolveConfig(time_limit_s=time_limit_s, marginals=False, progress=seen))
        solver = plan.solver.model_dump()
        out.update(status=solver["status"], gap=solver["mip_gap"], bcr=plan.metrics.bcr_requests_per_usd,
                   size=f"{solver.get('columns')}/{solver.get('integer_columns')}/{solver.get('rows')}")
        if solver["status"] == "optimal" or solver["mip_gap"] <= min(GAPS):
            for gap in GAPS:
                marks.setdefault(f"{100 * gap:g}%", time.perf_counter() - start)
    except Exception as err:  # a case that ends without a plan is a result, not a crash of the bench
        out.update(status=type(err).__name__, gap=float("inf"), bcr=0.0, size="-")
    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    out.update(marks=marks, seconds=time.perf_counter() - start, peak_mb=peak / 1024)
    return out


def _median(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    return f"{statistics.median(got):.1f}" if len(got) == len(values) and got else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16x12")
    parser.add_argument("--examples", default="pdd-two-dc,sixteen-dc")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--chips-per-site", type=int, default=2)
    parser.add_argument("--link-density", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one case, print its JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.time_limit, args.chips_per_site, args.link_density, args.seed)))
        return
    cases = [c for c in (args.examples.split(",") + args.sizes.split(",")) if c]
    print(f"{'case':<14} {'columns/int/rows':>20} {'first s':>8} {'5 % s':>7} {'2 % s':>7} {'1 % s':>7} "
          f"{'peak MB':>8} {'status':>10} {'gap %':>7} {'BCR':>9}")
    for case in cases:
        runs = []
        for _ in range(args.repeats):
            cmd = [sys.executable, __file__, "--one", case, "--time-limit", str(args.time_limit),
                   "--chips-per-site", str(args.chips_per_site), "--link-density", str(args.link_density),
                   "--seed", str(args.seed)]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE,
                                  env={**__import__("os").environ, "PYTHONPATH": str(HERE)})
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        last = runs[-1]
        print(f"{case:<14} {last['size']:>20} {_median([r['marks'].get('first') for r in runs]):>8} "
              + " ".join(f"{_median([r['marks'].get(f'{100 * g:g}%') for r in runs]):>7}" for g in GAPS)
              + f" {statistics.median(r['peak_mb'] for r in runs):>8.0f} {last['status']:>10} "
              f"{100 * last['gap']:>7.2f} {last['bcr']:>9.2f}")


if __name__ == "__main__":
    main()
