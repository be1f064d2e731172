"""The `placer` command line: a thin face over the library functions.

Exit codes (CONTRACTS.md): 0 success, 2 bad input, 3 infeasible, 4 no feasible plan
within the time limit, 1 anything else. No traceback for a user's mistake.
"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from placer.cli.output import err, fail, out
from placer.errors import PlacerError

app = typer.Typer(
    name="placer",
    help="Hardware-aware placement optimizer for PDD (Prefill / RelayDecode / MainDecode) LLM inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class Objective(str, Enum):
    bcr = "bcr"
    min_cost = "min-cost"
    max_goodput = "max-goodput"


class Solver(str, Enum):
    ortools = "ortools"
    ortools_highs = "ortools-highs"
    ortools_scip = "ortools-scip"
    pulp = "pulp"


ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML (or JSON) file.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the contract JSON instead of tables.")]
SolverOpt = Annotated[Solver, typer.Option(help="MILP backend: OR-Tools (HiGHS, or SCIP) or PuLP (CBC).")]
TimeOpt = Annotated[float, typer.Option("--time-limit", help="Solver time limit, seconds.")]
ObjectiveOpt = Annotated[Objective, typer.Option(help="What to optimise.")]


def _write(path: Path | None, text: str) -> None:
    if path is None:
        return
    try:
        path.write_text(text + "\n")
    except OSError as e:
        from placer.errors import InputError

        fail(InputError(f"--out: cannot write {str(path)!r}: {e.strerror}"))


@app.command()
def optimize(
    scenario: ScenarioArg,
    objective: ObjectiveOpt = Objective.bcr,
    solver: SolverOpt = Solver.ortools,
    time_limit: TimeOpt = 30.0,
    json_out: JsonOpt = False,
    out_path: Annotated[Path | None, typer.Option("--out", help="Also write the plan JSON here.")] = None,
    marginals: Annotated[bool, typer.Option(help="Re-solve to price each binding constraint.")] = True,
    profiles: Annotated[str | None, typer.Option(
        "--profiles", help="Measured chip profiles to calibrate with: 'latest' (database), a profile JSON "
        "or a directory of them. Chips without one keep their datasheet figures.")] = None,
    verify: Annotated[bool, typer.Option(
        "--verify", help="Simulate the plan; while its simulated P90 TTFT misses the SLA, re-solve with a "
        "tighter utilisation cap (each round printed to stderr).")] = False,
    verify_rounds: Annotated[int, typer.Option("--verify-rounds", help="Most re-solves --verify may do.")] = 3,
) -> None:
    """Solve for the plan that maximises BCR (or the chosen objective)."""
    from placer.optimize import SolveConfig
    from placer.optimize import optimize as run
    from placer.specs import load_scenario

    try:
        loaded = load_scenario(scenario)
        measured = _measured(profiles, loaded) if profiles else None
        config = SolveConfig(objective.value, solver.value, time_limit, marginals)
        plan = run(loaded, config, measured=measured)
        if verify:
            from placer.optimize import as_problem
            from placer.sim.verify import verify_plan

            plan = verify_plan(as_problem(loaded, measured), plan, verify_rounds, solve=config,
                               log=lambda msg: err.print(msg, highlight=False, markup=False)).plan
    except PlacerError as e:
        fail(e)
    text = plan.to_json()
    _write(out_path, text)
    if json_out:
        print(text)
    else:
        from placer.render import plan_view

        out.print(plan_view(plan))


@app.command()
def evaluate(
    scenario: ScenarioArg,
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.json", help="Plan to check.", show_default=False)],
    solver: SolverOpt = Solver.ortools,
    time_limit: TimeOpt = 30.0,
    json_out: JsonOpt = False,
) -> None:
    """Metrics of a given plan without re-optimising its pools."""
    from placer.optimize import SolveConfig, evaluate_plan
    from placer.plan import load_plan
    from placer.specs import load_scenario

    try:
        plan = evaluate_plan(load_scenario(scenario), load_plan(plan_file), SolveConfig(backend=solver.value, time_limit_s=time_limit))
    except PlacerError as e:
        fail(e)
    if json_out:
        print(plan.to_json())
    else:
        from placer.render import plan_view

        out.print(plan_view(plan))


@app.command()
def compare(
    scenario: ScenarioArg,
    objective: ObjectiveOpt = Objective.bcr,
    solver: SolverOpt = Solver.ortools,
    time_limit: TimeOpt = 30.0,
    json_out: JsonOpt = False,
) -> None:
    """The PDD plan beside the baselines same-dc-pd, cross-dc-pd and hetero-same-dc-pd."""
    from placer.baselines import compare as run
    from placer.optimize import SolveConfig, as_problem
    from placer.plan import Plan
    from placer.specs import load_scenario

    try:
        result = run(as_problem(load_scenario(scenario)), SolveConfig(objective.value, solver.value, time_limit))
    except PlacerError as e:
        fail(e)
    if json_out:
        def dump(p):
            return json.loads(p.to_json()) if isinstance(p, Plan) else p

        print(json.dumps({"pdd": dump(result["pdd"]),
                          "baselines": {k: dump(v) for k, v in result["baselines"].items()}}, indent=2))
    else:
        from placer.render import compare_view

        out.print(compare_view(result))


def _measured(source: str, scenario) -> dict:
    """Measured efficiencies for the scenario's chips (profiler.calibrate)."""
    from profiler.calibrate import (
        measured_from,  # a face may call a sibling; the planner never does
    )

    chips = {chip for dc in scenario.datacenters for chip in dc.inventory}
    return measured_from(source, chips=chips)


def _register_extensions() -> None:
    """Commands of other areas live in their own modules; each imports its heavy
    dependencies inside its command functions so `placer optimize` starts fast."""
    from importlib.metadata import entry_points

    from placer.cli import report, sim
    from placer.service import cli as service_cli

    sim.register(app)
    service_cli.register(app)
    report.register(app)
    # profiler and executor plug in through the "placer.commands" entry points
    # (pyproject.toml), so that placer never imports them.
    for ep in sorted(entry_points(group="placer.commands"), key=lambda e: e.name):
        ep.load()(app)


_register_extensions()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
