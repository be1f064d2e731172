"""Planner benchmark: solve time and gap on the bundled examples, PDD against baselines.

    .venv/bin/python bench/bench_planner.py [--repeats N] [--solver ortools|pulp|ortools-scip]

Prints, in one run: the median solve seconds and the MIP gap for pdd-two-dc and
eight-dc (targets: <= 1 s and <= 10 s to <= 1 % gap on 2 cores), and the ratios
PDD / each baseline for BCR and P90 TTFT on pdd-two-dc (the PDD report saw
BCR x1.375 against same-DC homogeneous PD and P90 TTFT x0.485 against cross-DC PD).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from placer.baselines import BASELINES, solve_baseline
from placer.optimize import SolveConfig, as_problem, optimize
from placer.specs import load_scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def time_solve(name: str, repeats: int, solver: str):
    problem = as_problem(load_scenario(EXAMPLES / name))
    seconds, plan = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        plan = optimize(problem, SolveConfig(backend=solver, marginals=False, time_limit_s=120))
        seconds.append(time.perf_counter() - start)
    return problem, plan, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--solver", default="ortools")
    args = parser.parse_args()

    print(f"{'scenario':<12} {'median s':>9} {'min s':>7} {'max s':>7} {'gap %':>7} {'status':>9}  target")
    results = {}
    for name, target in (("pdd-two-dc.yaml", 1.0), ("eight-dc.yaml", 10.0)):
        problem, plan, secs = time_solve(name, args.repeats, args.solver)
        results[name] = (problem, plan)
        print(f"{name[:-5]:<12} {statistics.median(secs):>9.2f} {min(secs):>7.2f} {max(secs):>7.2f} "
              f"{100 * plan.solver.mip_gap:>7.3f} {plan.solver.status:>9}  <= {target:g} s, <= 1 % gap")

    problem, pdd = results["pdd-two-dc.yaml"]
    m = pdd.metrics
    print(f"\npdd-two-dc PDD plan: BCR {m.bcr_requests_per_usd:.2f} req/USD, cost {m.cost_usd_per_h:.2f} USD/h, "
          f"goodput {m.goodput_rps:.3f}/{m.offered_rps:.3f} req/s, TTFT P50/P90/P99 "
          f"{m.ttft_p50_s:.3f}/{m.ttft_p90_s:.3f}/{m.ttft_p99_s:.3f} s, WAN {m.wan_gbit_per_s:.2f} Gbit/s, "
          f"RLD share {100 * m.rld_token_share:.2f} %")
    print(f"{'baseline':<18} {'BCR':>9} {'served':>8} {'P90 s':>8} {'PDD/base BCR':>13} {'PDD/base P90':>13}  note")
    for name in BASELINES:
        base = solve_baseline(problem, name, SolveConfig(backend=args.solver, time_limit_s=120))
        b = base.metrics
        bcr_ratio = m.bcr_requests_per_usd / b.bcr_requests_per_usd if b.bcr_requests_per_usd > 0 else float("inf")
        p90_ratio = m.ttft_p90_s / b.ttft_p90_s if b.ttft_p90_s > 0 else float("nan")
        note = next((n for n in base.notes if n.startswith("cannot")), "")
        print(f"{name:<18} {b.bcr_requests_per_usd:>9.2f} {b.served_rps:>8.2f} {b.ttft_p90_s:>8.3f} "
              f"{bcr_ratio:>13.3f} {p90_ratio:>13.3f}  {note}")
    print("\nreport's figures: PDD/same-dc-pd BCR >= 1.375, PDD/cross-dc-pd P90 TTFT <= 0.485")


if __name__ == "__main__":
    main()
