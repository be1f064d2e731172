"""Planner before/after: the same ``placer optimize X --json`` from two checkouts, alternately.

    PYTHONPATH=. .venv/bin/python bench/compare_planner.py --base /path/to/main [--repeats 3]
        [--examples pdd-two-dc,eight-dc] [--python .venv/bin/python] [--time-limit 300] [--marginals] [--verify]

For each example (default: every ``examples/*.yaml``) and repeat, runs the base checkout's
CLI and this one's in turn (so both see the same machine load; ``--no-marginals`` unless
``--marginals``: the marginal-value re-solves do not change the plan; ``--no-verify`` unless ``--verify``: the
plan's simulation is not the planner's), and prints per example the
median wall and CPU seconds of each side (CPU = the child's user + system time, steadier
than wall on a shared machine) and the solver's own seconds (the plan's ``solver.seconds``: the Dinkelbach
search, no imports, build or metrics), their ratio this/base, and the plans' BCR, cost, goodput,
solver status and MIP gap side by side. A BCR that differs by more than the larger of the
two reported gaps is flagged: the change lost (or found) optimum.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def run_once(root: Path, python: str, scenario: Path, time_limit_s: float,
             extra: tuple[str, ...] = ("--no-marginals",)) -> tuple[float, float, dict]:
    """(wall s, CPU s, plan JSON) of one ``placer optimize --json`` in checkout ``root``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([python, "-m", "placer.cli", "optimize", str(scenario), "--json", "--time-limit",
                           str(time_limit_s), *extra], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        return wall, cpu, {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    return wall, cpu, json.loads(proc.stdout)


def _metrics(plan: dict) -> tuple[float, float, float, str, float]:
    m, s = plan["metrics"], plan["solver"]
    return m["bcr_requests_per_usd"], m["cost_usd_per_h"], m["goodput_rps"], s["status"], s["mip_gap"]


def compare(base: Path, python: str, names: list[str], repeats: int, time_limit_s: float,
            extra: tuple[str, ...] = ("--no-marginals",)) -> bool:
    """Print the comparison; True when every example's BCR agrees within the stated gaps."""
    agree = True
    print(f"{'scenario':<11} {'base wall':>9} {'this wall':>9} {'ratio':>6} {'base cpu':>8} {'this cpu':>8} "
          f"{'ratio':>6} {'base solve':>10} {'this solve':>10} {'ratio':>6}  {'base BCR':>10} {'this BCR':>10} "
          f"{'base gap':>8} {'this gap':>8}  verdict")
    for name in names:
        runs: dict[str, list] = {"base": [], "this": []}
        for _ in range(repeats):
            for side, root in (("base", base), ("this", HERE)):
                runs[side].append(run_once(root, python, root / "examples" / f"{name}.yaml", time_limit_s,
                                              extra))
        plans = {side: r[-1][2] for side, r in runs.items()}
        if any("error" in p for p in plans.values()):
            print(f"{name:<11} {plans['base'].get('error', 'ok')} | {plans['this'].get('error', 'ok')}")
            agree = False
            continue
        wall = {s: statistics.median(w for w, _, _ in r) for s, r in runs.items()}
        cpu = {s: statistics.median(c for _, c, _ in r) for s, r in runs.items()}
        solver = {s: statistics.median(p.get("solver", {}).get("seconds", float("nan")) for _, _, p in r)
                  for s, r in runs.items()}
        (b_bcr, _, _, _, b_gap), (t_bcr, _, _, _, t_gap) = _metrics(plans["base"]), _metrics(plans["this"])
        tolerance = max(b_gap, t_gap, 1e-6)
        same = abs(t_bcr - b_bcr) <= tolerance * max(b_bcr, t_bcr)
        agree &= same
        print(f"{name:<11} {wall['base']:>9.2f} {wall['this']:>9.2f} {wall['this'] / wall['base']:>6.2f} "
              f"{cpu['base']:>8.2f} {cpu['this']:>8.2f} {cpu['this'] / cpu['base']:>6.2f} {solver['base']:>10.2f} "
              f"{solver['this']:>10.2f} {solver['this'] / solver['base']:>6.2f}  {b_bcr:>10.3f} "
              f"{t_bcr:>10.3f} {100 * b_gap:>7.3f}% {100 * t_gap:>7.3f}%  "
              f"{'same optimum' if same else 'BCR DIFFERS beyond the gap'}")
    return agree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="the checkout to compare against (e.g. main)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--examples", default=",".join(sorted(p.stem for p in (HERE / "examples").glob("*.yaml"))))
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--marginals", action="store_true", help="time the marginal-value re-solves too")
    parser.add_argument("--verify", action="store_true", help="time the plan's simulation too (optimize's default)")
    args = parser.parse_args()
    extra = (*(() if args.marginals else ("--no-marginals",)), *(() if args.verify else ("--no-verify",)))
    ok = compare(args.base.resolve(), args.python, args.examples.split(","), args.repeats, args.time_limit, extra)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
