"""Simulator benchmark: simulated requests per wall second, and memory that stays flat.

    .venv/bin/python bench/bench_simulator.py [--case pdd-two-dc|kv-bound] [--requests N] [--seed S] [--profile]

``pdd-two-dc`` (default): examples/pdd-two-dc.yaml and its BCR plan, solved first: the wall time of
replaying ``--requests`` requests (target: >= 20,000 requests per second on one core), then the
peak traced memory (tracemalloc) of runs of N/5 and N requests — results are streamed
(quantile sketches, bounded time series), so the two peaks should be about equal.
``kv-bound``: decoders whose KV is full, where every join scans the line waiting for KV room —
rnd-31-5 of ``bench_agreement.py --random 20 --seed 31`` (DeepSeek-V3 at 420.7 req/s, bench/data/rnd-31-5.yaml)
and the plan ``placer optimize --time-limit 8`` made for it on a 2-core VM before the KV repair
(:mod:`placer.kv_repair`; bench/data/rnd-31-5-first-plan.json): MD dc0's MI300X decoders hold ~1,350
requests at 94 % of their KV, a third of arrivals waiting for room (300,000 requests by default: their KV
fills over the first few hundred simulated seconds); the wall time only.
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
DATA = Path(__file__).resolve().parent / "data"
TARGET_RPS = 20_000
#: Requests each case replays by default.
REQUESTS = {"pdd-two-dc": 100_000, "kv-bound": 300_000}


def case(name: str):
    """(label, problem, plan) of a case (the module docstring)."""
    if name == "pdd-two-dc":
        problem = as_problem(load_scenario(EXAMPLE))
        return name, problem, optimize(problem, SolveConfig(marginals=False))
    from placer import kv_repair
    from placer.plan import load_plan

    problem = as_problem(load_scenario(DATA / "rnd-31-5.yaml"))
    plan = load_plan(DATA / "rnd-31-5-first-plan.json")
    waiting = max(kv_repair.waiting_pools(problem, plan).values(), default=0.0)
    return (f"kv-bound (rnd-31-5's first plan: {100 * waiting:.0f} % of its fullest decoders' arrivals wait for KV)",
            problem, plan)


def peak_memory_bytes(problem, plan, requests: int, seed: int) -> int:
    tracemalloc.start()
    try:
        simulate(problem, plan, SimConfig(requests=requests, seed=seed))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(REQUESTS), default="pdd-two-dc")
    parser.add_argument("--requests", type=int, default=None, help="default: 100,000 (pdd-two-dc), 300,000 (kv-bound)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    requests = args.requests or REQUESTS[args.case]
    label, problem, plan = case(args.case)
    config = SimConfig(requests=requests, seed=args.seed)
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
    rate = requests / wall
    verdict = (f" ({'meets' if rate >= TARGET_RPS else 'MISSES'} the {TARGET_RPS:,} req/s target)"
               if args.case == "pdd-two-dc" else "")
    print(f"{label}: {requests:,} requests simulated in {wall:.2f} s wall "
          f"= {rate:,.0f} requests/s{verdict}; "
          f"{result['simulated_s']:.0f} s of simulated time, P90 TTFT {result['ttft_p90_s']:.3f} s, "
          f"goodput {result['goodput_rps']:.2f} req/s")
    if args.case != "pdd-two-dc":
        return
    small = max(1_000, requests // 5)
    peaks = {n: peak_memory_bytes(problem, plan, n, args.seed) for n in (small, requests)}
    a, b = peaks[small], peaks[requests]
    print(f"peak traced memory: {a / 1e6:.2f} MB at {small:,} requests, {b / 1e6:.2f} MB at {requests:,} "
          f"requests (x{b / a:.2f} for x{requests / small:.0f} the requests)")


if __name__ == "__main__":
    main()
