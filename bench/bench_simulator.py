"""Simulator benchmark: simulated requests per wall second, and memory that stays flat.

    .venv/bin/python bench/bench_simulator.py [--requests N] [--seed S] [--profile]

On examples/pdd-two-dc.yaml (its BCR plan, solved first): the wall time of replaying
``--requests`` requests (target: >= 20,000 requests per second on one core), then the
peak traced memory (tracemalloc) of runs of N/5 and N requests — results are streamed
(quantile sketches, bounded time series), so the two peaks should be about equal.
``--profile`` prints the top of a cProfile of the timed run instead of timing it alone.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
import tracemalloc
from pathlib import Path

from placer.optimize import SolveConfig, as_problem, optimize
from placer.sim import SimConfig, simulate
from placer.specs import load_scenario

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pdd-two-dc.yaml"
TARGET_RPS = 20_000


def peak_memory_bytes(problem, plan, requests: int, seed: int) -> int:
    tracemalloc.start()
    try:
        simulate(problem, plan, SimConfig(requests=requests, seed=seed))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    problem = as_problem(load_scenario(EXAMPLE))
    plan = optimize(problem, SolveConfig(marginals=False))
    config = SimConfig(requests=args.requests, seed=args.seed)
    simulate(problem, plan, SimConfig(requests=2_000, seed=args.seed))  # warm imports and caches

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        simulate(problem, plan, config)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(20)
        print(buf.getvalue())
        return

    start = time.perf_counter()
    result = simulate(problem, plan, config)
    wall = time.perf_counter() - start
    rate = args.requests / wall
    verdict = "meets" if rate >= TARGET_RPS else "MISSES"
    print(f"pdd-two-dc: {args.requests:,} requests simulated in {wall:.2f} s wall "
          f"= {rate:,.0f} requests/s ({verdict} the {TARGET_RPS:,} req/s target); "
          f"{result['simulated_s']:.0f} s of simulated time, P90 TTFT {result['ttft_p90_s']:.3f} s, "
          f"goodput {result['goodput_rps']:.2f} req/s")
    small = max(1_000, args.requests // 5)
    peaks = {n: peak_memory_bytes(problem, plan, n, args.seed) for n in (small, args.requests)}
    a, b = peaks[small], peaks[args.requests]
    print(f"peak traced memory: {a / 1e6:.2f} MB at {small:,} requests, {b / 1e6:.2f} MB at {args.requests:,} "
          f"requests (x{b / a:.2f} for x{args.requests / small:.0f} the requests)")


if __name__ == "__main__":
    main()
