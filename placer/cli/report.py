"""``placer report PLAN.json [--scenario S] [--sweep CSV] --out DIR``: a thin face over the report.

→ :func:`placer.report.build_report` (a fleet plan: :func:`placer.report.fleet.build_fleet_report`,
one report per model and an index): figures (PNG, SVG) and one self-contained
``report.html``; notes (what could not be drawn, and why) go to stderr. Mounted
lazily by :mod:`placer.cli.app`: imported only when ``placer report`` runs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from placer.cli.output import err, out
from placer.cli.output import fail as _fail
from placer.errors import InputError, PlacerError
from placer.plan import load_plan
from placer.plancheck import check_plan_alone
from placer.report import build_report
from placer.report.fleet import build_fleet_report
from placer.specs import load_scenario


def report(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.json", help="Plan to draw (placer optimize --out).",
                                              show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for report.html and the PNG/SVG figures.",
                                          show_default=False)],
    scenario: Annotated[Path | None, typer.Option(
        "--scenario", help="The plan's scenario: adds the baselines, the simulated TTFT CDF and the "
        "RLD-share / WAN-use timeline. Without it only what the plan alone shows is drawn.")] = None,
    sweep: Annotated[Path | None, typer.Option(
        "--sweep", help="sweep.csv from `placer sweep --vary hit-mean`: adds the BCR-vs-hit-rate bathtub.")] = None,
    requests: Annotated[int, typer.Option("--requests", help="Simulated requests per plan.")] = 5000,
    seed: Annotated[int, typer.Option("--seed", help="Simulation seed.")] = 0,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Solver time limit per baseline, s.")] = 30.0,
) -> None:
    """Draw a plan: a self-contained HTML report with its diagram, metrics and charts."""
    try:
        if requests < 1:
            raise InputError(f"--requests must be >= 1, got {requests}")
        if not (time_limit > 0 and math.isfinite(time_limit)):
            raise InputError(f"--time-limit must be a positive number of seconds, got {time_limit}")
        plan = load_plan(plan_file)
        check_plan_alone(plan)  # with --scenario, build_report checks it against the scenario too
        loaded = load_scenario(scenario) if scenario is not None else None
        build = build_fleet_report if plan.models or any(p.model for p in plan.pools) else build_report
        result = build(plan, out_dir, loaded, sweep, requests=requests, seed=seed,
                              time_limit_s=time_limit, source=plan_file.name,
                              log=lambda msg: err.print(msg, highlight=False, markup=False))
    except PlacerError as e:
        _fail(e)
    for note in result.notes:
        err.print(f"note: {note}", highlight=False, markup=False)
    out.print(f"wrote {result.html_path} and {len(result.files) - 1} figure files", highlight=False,
              markup=False)
