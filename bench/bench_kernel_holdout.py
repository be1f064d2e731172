"""Per-op held-out check of the measured kernel tables (issue 41, part 5).

    PYTHONPATH=. .venv/bin/python bench/bench_kernel_holdout.py [--data-dir DIR] [--system S] [--engine E]

For every shipped (system, engine, version) and op family: every fifth shape of each key is
held out and predicted from the rest with the planner's own interpolation
(:mod:`placer.kernels.holdout`); prints the shapes held out, the share the remaining grid still
covers, and the median and P90 relative error. Target (issue 41): median <= 5 %, P90 <= 15 %
per family. With ``--against DIR``: the shapes DIR's tables have and these lack (what ``--thin``
left out) predicted from these. Standard library only; no GPU.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from placer.kernels.holdout import against, holdout
from placer.kernels.tables import available, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=None, help="tables directory (default: the shipped ones)")
    ap.add_argument("--system", default=None)
    ap.add_argument("--engine", default=None)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--against", type=Path, default=None,
                    help="another tables directory (e.g. imported without --thin): predict the shapes it has "
                         "and these tables lack, instead of the held-out check")
    args = ap.parse_args()
    print(f"{'system':<9} {'engine':<17} {'family':<21} {'held':>6} {'covered':>8} {'median':>7} {'P90':>7}")
    per_family: dict[str, list[tuple[float, float]]] = {}
    for system, engine, version in available(args.data_dir):
        if (args.system and system != args.system) or (args.engine and engine != args.engine):
            continue
        tables = load(system, engine, version, data_dir=args.data_dir)
        if args.against is not None:
            reference = load(system, engine, version, data_dir=args.against)
            results = against(tables, reference) if reference else []
        else:
            results = holdout(tables, args.every)
        for r in results:
            med = "-" if r.median_rel is None else f"{100 * r.median_rel:.1f}%"
            p90 = "-" if r.p90_rel is None else f"{100 * r.p90_rel:.1f}%"
            print(f"{system:<9} {engine + '-' + version:<17} {r.family:<21} {r.held_out:>6} "
                  f"{r.covered / r.held_out:>7.0%} {med:>7} {p90:>7}")
            if r.median_rel is not None:
                per_family.setdefault(r.family, []).append((r.median_rel, r.p90_rel))
    print("\nper family over the (system, engine) tables (target: median <= 5 %, P90 <= 15 %)")
    print(f"  {'family':<21} {'tables':>6} {'on target':>9} {'median of medians':>18} {'median of P90s':>15} "
          f"{'worst median':>13} {'worst P90':>10}")
    for family, rows in per_family.items():
        meds, p90s = sorted(m for m, _ in rows), sorted(p for _, p in rows)
        ok = sum(1 for m, p in rows if m <= 0.05 and p <= 0.15)
        print(f"  {family:<21} {len(rows):>6} {ok:>9} {100 * statistics.median(meds):>17.1f}% "
              f"{100 * statistics.median(p90s):>14.1f}% {100 * meds[-1]:>12.1f}% {100 * p90s[-1]:>9.1f}%")


if __name__ == "__main__":
    main()
