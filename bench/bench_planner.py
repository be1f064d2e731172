"""Planner benchmark: solve time and where it goes, on the bundled examples; PDD against baselines.

    PYTHONPATH=. .venv/bin/python bench/bench_planner.py [--repeats N] [--solver ortools|pulp|ortools-scip]
        [--examples pdd-two-dc,eight-dc,sixteen-dc] [--no-compare] [--lp]

Prints, in one run:

* per example, the median seconds of ``optimize`` without marginal values (targets: pdd-two-dc
  <= 1 s, eight-dc <= 10 s, sixteen-dc <= 60 s, to <= 1 % gap on 2 cores) and its split:
  model build (data + rows), MILP/LP solves (count; LP relaxations and MILPs apart: the LP
  ratio bound, the LP rounded's LPs and routing MILPs
  (:mod:`placer.ilp.rounding`), then each Dinkelbach MILP), Dinkelbach iterations, the rest (extraction,
  metrics, validation); then, separately, the marginal-value re-solves of the binding rows
  (``optimize``'s default) with their count;
* with ``--lp``, per example the LP relaxation against the plan: least cost against the plan's
  cost, and the ratio bound Dinkelbach starts from against the plan's ratio (what a stronger
  formulation would close);
* on pdd-two-dc, the ratios PDD / each baseline for BCR and P90 TTFT (the PDD report saw
  BCR x1.375 against same-DC homogeneous PD and P90 TTFT x0.485 against cross-DC PD) and
  the break-even GPU-B price and line bandwidth at which PDD's BCR equals same-DC PD's.

The split is measured by wrapping the functions ``optimize`` calls (no change to them).
On a shared machine compare against a base checkout run alternately with
``bench/compare_planner.py`` (wall and CPU medians, and whether the BCR agrees).
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

import placer.ilp.dinkelbach as dinkelbach
import placer.ilp.rounding as rounding
import placer.ilp.starts as starts
import placer.optimize as optimize_mod
from placer.baselines import BASELINES, solve_baseline
from placer.breakeven import break_even
from placer.errors import PlacerError
from placer.ilp.formulation import pdd_architecture
from placer.optimize import SolveConfig, as_problem, optimize
from placer.specs import load_scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TARGETS_S = {"pdd-two-dc": 1.0, "eight-dc": 10.0, "sixteen-dc": 60.0}
TIME_LIMIT_S = 120.0  # per optimize call: twice the largest target


class Split:
    """Seconds and calls per phase of one ``optimize`` call."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        self.calls[phase] = self.calls.get(phase, 0) + 1


@contextmanager
def _timed(split: Split):
    """Wrap model build, solver calls and marginal re-solves with timers for the duration."""
    saved = (optimize_mod.build, dinkelbach.solve, optimize_mod.binding_with_marginals, starts.solve, rounding.solve)
    inside_marginals = [False]

    def wrap(fn, phase):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if not inside_marginals[0] or phase == "marginals":
                    split.add(phase, time.perf_counter() - start)
                    if phase == "solves":  # LP relaxations and MILPs apart
                        milp = any(v.integer for v in args[0].vars)
                        split.add("milps" if milp else "lps", time.perf_counter() - start)
        return timed

    def marginals(*args, **kwargs):
        inside_marginals[0] = True
        try:
            return wrap(saved[2], "marginals")(*args, **kwargs)
        finally:
            inside_marginals[0] = False

    optimize_mod.build = wrap(saved[0], "build")
    dinkelbach.solve = wrap(saved[1], "solves")
    starts.solve = wrap(saved[3], "solves")  # the LP ratio bound (placer.ilp.starts, split from dinkelbach)
    rounding.solve = wrap(saved[4], "solves")  # the LP rounded: its LPs and small routing MILPs
    optimize_mod.binding_with_marginals = marginals
    try:
        yield split
    finally:
        (optimize_mod.build, dinkelbach.solve, optimize_mod.binding_with_marginals, starts.solve,
         rounding.solve) = saved


def time_solve(name: str, repeats: int, solver: str, marginals: bool):
    """(problem, last plan, [(total seconds, Split)]) of ``repeats`` optimize calls."""
    problem = as_problem(load_scenario(EXAMPLES / f"{name}.yaml"))
    runs, plan = [], None
    for _ in range(repeats):
        with _timed(Split()) as split:
            start = time.perf_counter()
            plan = optimize(problem, SolveConfig(backend=solver, marginals=marginals, time_limit_s=TIME_LIMIT_S))
            runs.append((time.perf_counter() - start, split))
    return problem, plan, runs


def _median_split(runs) -> tuple[float, dict[str, float], dict[str, int]]:
    total = statistics.median(t for t, _ in runs)
    phases = {p for _, s in runs for p in s.seconds}
    secs = {p: statistics.median(s.seconds.get(p, 0.0) for _, s in runs) for p in phases}
    calls = {p: max(s.calls.get(p, 0) for _, s in runs) for p in phases}
    return total, secs, calls


def print_times(names: list[str], repeats: int, solver: str) -> dict:
    print(f"{'scenario':<11} {'median s':>8} {'build s':>8} {'solves s':>9} {'LPs s':>6} {'MILPs s':>7} "
          f"{'solves':>6} {'Dinkel.':>7} "
          f"{'rest s':>7} {'gap %':>6} {'status':>8} {'marginals s':>11} {'re-solves':>9}  target")
    results = {}
    for name in names:
        try:
            problem, plan, runs = time_solve(name, repeats, solver, marginals=False)
        except PlacerError as err:  # e.g. no plan within the time limit: say so, go on
            print(f"{name:<11} no plan: {err}")
            continue
        total, secs, calls = _median_split(runs)
        _, _, with_marg = time_solve(name, 1, solver, marginals=True)
        m_s = with_marg[0][1].seconds.get("marginals", 0.0)
        n_rows = len(plan.binding)
        rest = total - secs.get("build", 0.0) - secs.get("solves", 0.0)
        results[name] = (problem, plan)
        print(f"{name:<11} {total:>8.2f} {secs.get('build', 0.0):>8.2f} {secs.get('solves', 0.0):>9.2f} "
              f"{secs.get('lps', 0.0):>6.2f} {secs.get('milps', 0.0):>7.2f} {calls.get('solves', 0):>6d} "
              f"{getattr(plan.solver, 'iterations', 0):>7d} {rest:>7.2f} "
              f"{100 * plan.solver.mip_gap:>6.3f} {plan.solver.status:>8} {m_s:>11.2f} {n_rows:>9d}  "
              f"<= {TARGETS_S.get(name, float('nan')):g} s, <= 1 % gap")
    return results


def print_compare(problem, pdd, solver: str) -> None:
    m = pdd.metrics
    print(f"\npdd-two-dc PDD plan: BCR {m.bcr_requests_per_usd:.2f} req/USD, cost {m.cost_usd_per_h:.2f} USD/h, "
          f"goodput {m.goodput_rps:.3f}/{m.offered_rps:.3f} req/s, TTFT P50/P90/P99 "
          f"{m.ttft_p50_s:.3f}/{m.ttft_p90_s:.3f}/{m.ttft_p99_s:.3f} s, WAN {m.wan_gbit_per_s:.2f} Gbit/s, "
          f"RLD share {100 * m.rld_token_share:.2f} %")
    print(f"{'baseline':<18} {'BCR':>9} {'served':>8} {'P90 s':>8} {'PDD/base BCR':>13} {'PDD/base P90':>13}  note")
    config = SolveConfig(backend=solver, time_limit_s=120)
    same_dc = None
    for name in BASELINES:
        base = solve_baseline(problem, name, config)
        same_dc = base if name == "same-dc-pd" else same_dc
        b = base.metrics
        bcr_ratio = m.bcr_requests_per_usd / b.bcr_requests_per_usd if b.bcr_requests_per_usd > 0 else float("inf")
        p90_ratio = m.ttft_p90_s / b.ttft_p90_s if b.ttft_p90_s > 0 else float("nan")
        note = next((n for n in base.notes if n.startswith("cannot")), "")
        print(f"{name:<18} {b.bcr_requests_per_usd:>9.2f} {b.served_rps:>8.2f} {b.ttft_p90_s:>8.3f} "
              f"{bcr_ratio:>13.3f} {p90_ratio:>13.3f}  {note}")
    print("report's figures: PDD/same-dc-pd BCR >= 1.375, PDD/cross-dc-pd P90 TTFT <= 0.485")
    start = time.perf_counter()
    answers = break_even(problem, pdd, same_dc, config)
    print(f"\nbreak-even against same-dc-pd ({time.perf_counter() - start:.1f} s):")
    for a in answers.values():
        print(f"  {a['question']}: {a['answer']}")


def print_lp_bounds(results: dict) -> None:
    """How far the LP relaxation is from each plan (what a stronger formulation would close): its
    least cost against the plan's cost, and its ratio bound (the most load G may take / least cost,
    the lambda Dinkelbach starts from) against the plan's goodput per USD/h."""
    print(f"\n{'scenario':<11} {'LP cost':>9} {'plan cost':>9} {'LP/plan':>7} {'LP ratio':>9} {'plan ratio':>10}")
    for name, (problem, plan) in results.items():
        form = optimize_mod.build(problem, pdd_architecture(problem))
        bound, least_cost, _ = starts._lp_ratio_bound(form, SolveConfig(time_limit_s=TIME_LIMIT_S).started())
        m = plan.metrics
        print(f"{name:<11} {least_cost:>9.2f} {m.cost_usd_per_h:>9.2f} {least_cost / m.cost_usd_per_h:>7.3f} "
              f"{bound or 0.0:>9.5f} {m.goodput_rps / m.cost_usd_per_h:>10.5f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--solver", default="ortools")
    parser.add_argument("--examples", default="pdd-two-dc,eight-dc,sixteen-dc")
    parser.add_argument("--no-compare", action="store_true", help="skip the baselines and break-even")
    parser.add_argument("--lp", action="store_true", help="print each example's LP relaxation bounds against its plan")
    args = parser.parse_args()
    results = print_times(args.examples.split(","), args.repeats, args.solver)
    if args.lp:
        print_lp_bounds(results)
    if not args.no_compare:
        problem, pdd = results.get("pdd-two-dc") or time_solve("pdd-two-dc", 1, args.solver, False)[:2]
        print_compare(problem, pdd, args.solver)


if __name__ == "__main__":
    main()
