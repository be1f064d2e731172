"""``placer optimize``, ``placer evaluate`` and ``placer compare``: thin faces over the planner.

* ``optimize SCENARIO`` → :func:`placer.optimize.optimize` (``--verify``: then
  :func:`placer.sim.verify.verify_plan`; ``--profiles``: measured chips and tables through
  :func:`measured_for`)
* ``evaluate SCENARIO PLAN.json`` → :func:`placer.optimize.evaluate_plan`
* ``compare SCENARIO`` → :func:`placer.breakeven.compare_with_break_even` (the baselines of
  :func:`placer.baselines.compare` and the break-even GPU-B price and line bandwidth;
  ``--no-break-even``: the baselines only)

``--profiles`` (all three, and ``simulate``): measured figures and latency tables through
:func:`measured_for` (it replaces the scenario's ``profiles:`` key). ``--engine`` (all three):
the scenario's ``engine`` replaced before solving (:func:`placer.cli.options.with_engine`).

Each prints the plan as tables (:mod:`placer.cli.render`) with why it looks so
(:func:`placer.report.why.explain`), or, with ``--json``, the contract JSON; a typed
error ends in :func:`placer.cli.output.fail`.
"""

from __future__ import annotations

import dataclasses

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from placer import kv_repair
from placer.cli.options import EngineOpt, RuntimeOpt, with_engine, with_runtime
from placer.cli.output import choices, err, fail, latest_from_database, out, working
from placer.cli.render import (
    binding_table, compare_view, links_table, metrics_table, perturb_view, plan_view, pools_table, routes_table,
    sla_line, verification_view,
)
from placer.errors import InfeasiblePlanError, InputError, PlacerError
from placer.ilp.backends import BACKENDS
from placer.optimize import OBJECTIVES, SolveConfig, as_problem, evaluate_plan
from placer.optimize import optimize as solve
from placer.plan import Plan, load_plan
from placer.perturb import check_fraction
from placer.profiles.records import measured_from_all
from placer.report.headline import headline
from placer.report.why import explain
from placer.slacheck import miss_words
from placer.specs import Scenario, load_scenario
from placer.verify_defaults import CHECK_REQUESTS, PERTURB_REQUESTS

if TYPE_CHECKING:
    from placer.sim.config import SimConfig

# Imported where used, not here (issue 47: `placer optimize --no-verify` pays only what it runs): the simulator
# (placer.sim, for the verification), placer.robust (--robust) and the fleet's planner (a fleet scenario).


Objective = choices("Objective", OBJECTIVES)
Solver = choices("Solver", BACKENDS)
VerifyArrivals = choices("VerifyArrivals", ("poisson", "bursty"))


ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML (or JSON) file.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the contract JSON instead of tables.")]
SolverOpt = Annotated[Solver, typer.Option(help="MILP backend: OR-Tools (HiGHS, or SCIP) or PuLP (CBC).")]
TimeOpt = Annotated[float, typer.Option("--time-limit", help="Solver time limit, seconds.")]
OptimizeTimeOpt = Annotated[float, typer.Option("--time-limit", help=(
    "Seconds for reading the scenario and solving: past them the best plan found comes back with its gap "
    "(exit 4 if none). Working out that plan's figures, and its verification in the simulator, follow."))]
ObjectiveOpt = Annotated[Objective, typer.Option(help="What to optimise.")]
PerturbOpt = Annotated[float, typer.Option(
    "--perturb", help="Report the plan simulated with every chip's prefill and decode speed X slower and X "
    f"faster (a 'robustness' line; 0: none; {PERTURB_REQUESTS:,} requests each). Runs with the verification "
    "(not with --no-verify).")]
#: Requests per simulation of --verify's repair rounds (its default before verification was on by default).
REPAIR_REQUESTS = 20_000
ProfilesOpt = Annotated[str | None, typer.Option(
    "--profiles", help="Measured profiles to plan with: 'latest' (database), a profile JSON, a CSV of measured "
    "latencies (docs/profiles.md) or a directory of them; replaces the scenario's 'profiles:'. Chips and "
    "settings without a measurement keep the roofline.")]


def optimize(
    scenario: ScenarioArg,
    objective: ObjectiveOpt = Objective.bcr,
    solver: SolverOpt = Solver.ortools,
    time_limit: OptimizeTimeOpt = 30.0,
    json_out: JsonOpt = False,
    out_path: Annotated[Path | None, typer.Option("--out", help="Also write the plan JSON here (with --json: only "
                                                  "there, and one line on stderr says so).")] = None,
    marginals: Annotated[bool, typer.Option(help="Re-solve to price each binding constraint.")] = True,
    profiles: ProfilesOpt = None,
    engine: EngineOpt = None,
    verify: Annotated[bool | None, typer.Option(
        "--verify/--no-verify", help="Default: simulate the plan once (--verify-requests, default "
        f"{CHECK_REQUESTS:,}) and print it beside the promise (plan JSON 'verification'), warning where they "
        "differ by more than 10 % or the simulation misses the SLA. --verify: also repair: while its simulated "
        "P90 TTFT misses the SLA, cut the planned load of the pools and lines that made the late requests and "
        "re-solve (each round printed to stderr); exit 3 if no round meets the SLA. --no-verify: no "
        "simulation.", show_default=False)] = None,
    verify_rounds: Annotated[int, typer.Option("--verify-rounds", help="Most re-solves --verify may do.")] = 3,
    verify_arrivals: Annotated[VerifyArrivals, typer.Option(
        "--verify-arrivals", help="Arrival process the verification simulates (the plan assumes Poisson).")
    ] = VerifyArrivals.poisson,
    verify_requests: Annotated[int | None, typer.Option(
        "--verify-requests", help=f"Requests per simulation (default {CHECK_REQUESTS:,}; --verify's repair "
        f"rounds {REPAIR_REQUESTS:,}).", show_default=False)] = None,
    best_effort: Annotated[bool, typer.Option(
        "--best-effort", help="Accept a plan whose planned TTFT P90 or attainment misses the SLA (exit 0); "
        "without it such a plan is printed, then exit 3 naming what binds.")] = False,
    perturb: PerturbOpt = 0.2,
    robust: Annotated[float | None, typer.Option(
        "--robust", help="Plan so that the SLA holds with every chip this fraction slower (compute and memory "
        "rates x (1 - X)); the plan's metrics are at nominal speed and 'robust' says what it costs in BCR "
        "against the nominal plan.", show_default=False)] = None,
    runtime: RuntimeOpt = None,
) -> None:
    """Solve for the plan that maximises BCR (or the chosen objective)."""
    try:
        # the clock starts here: reading the scenario and profiles counts against --time-limit too
        config = SolveConfig(objective.value, solver.value, time_limit, marginals).started()
        check_fraction("--perturb", perturb)
        if robust is not None:
            check_fraction("--robust", robust)
        loaded = with_engine(load_scenario(scenario), engine)
        measured = measured_for(loaded, profiles)
        if loaded.is_fleet and (verify or robust is not None):
            raise InputError(f"{'--verify' if verify else '--robust'}: a fleet plan cannot be simulated or "
                             "derated yet; plan without it")
        problem = _problem(loaded, measured, runtime)
        if verify is not False:  # the simulator only when it runs (its config checked before the solve)
            from placer.sim.config import SimConfig

            sim = SimConfig(requests=verify_requests or CHECK_REQUESTS, arrivals=verify_arrivals.value)
        with working("solving") as say:
            config = dataclasses.replace(config, progress=lambda p: say(p.line()))
            if robust is not None:
                from placer.robust import optimize_robust

                plan = optimize_robust(problem, robust, config)
            else:
                plan = solve(problem, config)
        with working("verifying the plan in the simulator"):
            if verify:
                plan = _verified(problem, plan, verify_rounds, config, SimConfig(
                    requests=verify_requests or REPAIR_REQUESTS, arrivals=verify_arrivals.value))
            if verify is not False and not loaded.is_fleet:
                plan = _checked(problem, plan, sim, perturb)
    except PlacerError as e:
        fail(e)
    text = plan.to_json()
    _write(out_path, text)
    sla = problem.shared.ttft_p90_s if loaded.is_fleet else problem.ttft_p90_s
    first = sla_line(plan, sla, _binds(plan))
    if plan.solver.status == "feasible":  # out of time: the best plan found, and how far from the optimum it may be
        gap = plan.solver.mip_gap
        err.print(f"best plan found within the time limit: at most {100 * gap:.2f} % below the optimum (the solver's "
                  "proven bound); a longer --time-limit may narrow it" if gap < float("inf")
                  else "best plan found within the time limit (no proven bound); --time-limit longer may do better",
                  highlight=False, markup=False, soft_wrap=True)
    if json_out:
        if not (_keeps_promise(plan) and (plan.verification is None or plan.verification.sla_met)):
            err.print(first)  # stdout stays the plan JSON; a miss is still said first
        if out_path is None:
            print(text)
        else:  # the plan is in the file: one line says where instead of the whole JSON again
            err.print(f"wrote the plan JSON to {out_path}", highlight=False, soft_wrap=True)
    else:
        out.print(first)
        out.print(_view(problem, plan))
        out.print(verification_view(plan))
        if out_path is not None:  # where the written plan goes next (placer.service.cli's plans import)
            out.print(f"bring it to the dashboard: placer plans import {out_path} --scenario {scenario}",
                      highlight=False, markup=False, soft_wrap=True)
    if not _keeps_promise(plan) and not best_effort:
        # the KV repair (placer.kv_repair) ran out of time: a longer limit may meet the SLA with nothing else changed
        longer = "a longer --time-limit, " if kv_repair.ran_out_of_time(plan) else ""
        fail(InfeasiblePlanError(f"the plan misses the SLA ({_miss_reason(plan)}); binding: {_binds(plan) or 'none'} "
                                 f"({longer}add capacity or bandwidth, loosen the SLA, or pass --best-effort to accept "
                                 "it)"))


def _problem(loaded: Scenario, measured: dict | None, runtime: Path | None):
    """The scenario as the planner takes it: a fleet (its planner imported only then) or one model's problem,
    with ``--runtime``'s costs."""
    if loaded.is_fleet:
        from placer.optimize_fleet import as_fleet

        return with_runtime(as_fleet(loaded, measured), runtime)
    return with_runtime(as_problem(loaded, measured), runtime)


def _checked(problem, plan: Plan, sim: SimConfig, perturb: float) -> Plan:
    """``plan`` with its default verification; a simulation that fails is reported, never fails the plan
    (the check is advisory: the plan was solved and validated without it)."""
    from placer.sim.verify import check_plan_by_simulation

    try:
        check = check_plan_by_simulation(problem, plan, sim, perturb, perturb_requests=min(sim.requests,
                                                                                           PERTURB_REQUESTS))
    except Exception as e:  # advisory, as marginal values are
        why = f"verification skipped: the simulation failed ({type(e).__name__}: {e})"
        err.print(f"warning: {why}", highlight=False, markup=False, soft_wrap=True)
        return plan.model_copy(update={"notes": [*plan.notes, why]})
    return plan.model_copy(update={"verification": check})


def _keeps_promise(plan: Plan) -> bool:
    """Whether the planned figures meet the SLA (and, for a --robust plan, also at the slower chips)."""
    return plan.metrics.sla_met is not False and (plan.robust is None or plan.robust.sla_met_slow)


def _miss_reason(plan: Plan) -> str:
    if plan.metrics.sla_met is False:
        return miss_words(plan.metrics.sla_misses or [])
    return (f"with every chip {100 * plan.robust.slowdown:g} % slower its planned TTFT P90 is "
            f"{plan.robust.ttft_p90_s_slow:.3f} s")


def _binds(plan: Plan) -> str:
    """The plan's binding constraints, named."""
    return ", ".join(b.constraint for b in plan.binding)


def evaluate(
    scenario: ScenarioArg,
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.json", help="Plan to check.", show_default=False)],
    solver: SolverOpt = Solver.ortools,
    time_limit: TimeOpt = 30.0,
    json_out: JsonOpt = False,
    profiles: ProfilesOpt = None,
    engine: EngineOpt = None,
    perturb: Annotated[float, typer.Option(
        "--perturb", help="Also simulate the plan with each chip's prefill and decode speed off by ±X, "
        "independently per chip (every corner of the box up to 3 chip types, else both extremes and 6 "
        "fixed-seed draws): its P90 TTFT, attainment and BCR in each case (plan JSON 'verification').")] = 0.0,
    perturb_requests: Annotated[int, typer.Option("--perturb-requests", help="Requests per --perturb simulation.")
                                ] = CHECK_REQUESTS,
    runtime: RuntimeOpt = None,
) -> None:
    """Metrics of a given plan without re-optimising its pools."""
    try:
        check_fraction("--perturb", perturb)
        loaded = with_engine(load_scenario(scenario), engine)
        if loaded.is_fleet and perturb > 0:
            raise InputError("--perturb: a fleet plan cannot be simulated yet; evaluate it without --perturb")
        measured = measured_for(loaded, profiles)
        problem = _problem(loaded, measured, runtime)
        with working("evaluating"):
            plan = evaluate_plan(problem, load_plan(plan_file),
                                 SolveConfig(backend=solver.value, time_limit_s=time_limit))
        if perturb > 0:
            from placer.sim.config import SimConfig
            from placer.sim.verify import check_plan_by_simulation

            check = check_plan_by_simulation(problem, plan, SimConfig(requests=perturb_requests), perturb,
                                             extremes_only=False)
            plan = plan.model_copy(update={"verification": check})
    except PlacerError as e:
        fail(e)
    if json_out:
        print(plan.to_json())
    else:
        out.print(_view(problem, plan))
        if perturb > 0:
            out.print(verification_view(plan), perturb_view(plan, perturb))


def compare(
    scenario: ScenarioArg,
    objective: ObjectiveOpt = Objective.bcr,
    solver: SolverOpt = Solver.ortools,
    time_limit: TimeOpt = 30.0,
    json_out: JsonOpt = False,
    profiles: ProfilesOpt = None,
    engine: EngineOpt = None,
    break_even: Annotated[bool, typer.Option(
        "--break-even/--no-break-even", help="Also find the GPU-B price and the line bandwidth at which PDD's BCR "
        "equals that of same-dc-pd's plan within the inventory (bisection over re-solves, each bounded by "
        "--time-limit and 20 s).")] = True,
    price_chip: Annotated[str | None, typer.Option(
        "--price-chip", help="The chip whose price the break-even varies (default: the chip of the PDD plan's "
        "MD pools, GPU-B in the report).")] = None,
) -> None:
    """The PDD plan beside the baselines same-dc-pd, cross-dc-pd, hetero-same-dc-pd (Splitwise), prfaas and agg."""
    # here, not at the top: only this verb solves the baselines (~50 ms of imports `placer optimize` need not pay)
    from placer.baselines import compare as compare_baselines, within_inventory
    from placer.breakeven import compare_with_break_even
    from placer.cli.fleetcompare import run as fleet_compare

    try:
        loaded = with_engine(load_scenario(scenario), engine)
        if loaded.is_fleet:  # per model: placer.cli.fleetcompare
            config = SolveConfig(objective.value, solver.value, time_limit)
            return fleet_compare(loaded, config, json_out, measured_for(loaded, profiles))
        problem = as_problem(loaded, measured_for(loaded, profiles))
        config = SolveConfig(objective.value, solver.value, time_limit)
        with working("solving the plan and the baselines"):
            if break_even:
                result = compare_with_break_even(problem, config, price_chip)
            else:
                result = compare_baselines(problem, config)
    except PlacerError as e:
        fail(e)
    if json_out:
        def dump(p):
            return json.loads(p.to_json()) if isinstance(p, Plan) else p

        body = {"pdd": dump(result["pdd"]), "baselines": {k: dump(v) for k, v in result["baselines"].items()},
                "scaled": {k: dump(v) for k, v in result.get("scaled", {}).items()}}
        if "pdd_best_within_inventory" in result:
            body["pdd_best_within_inventory"] = dump(result["pdd_best_within_inventory"])
        body["within_inventory"] = within_inventory(result)
        if "break_even" in result:
            body["break_even"] = result["break_even"]
        body["headline"] = headline(result)
        print(json.dumps(body, indent=2))
    else:
        out.print(compare_view(result))


def _view(problem, plan: Plan):
    """The plan's tables with why it looks so (single model), or :func:`_fleet_view`."""
    return _fleet_view(problem, plan) if plan.models else plan_view(plan, explain(problem, plan))


def _fleet_view(fleet, plan: Plan):
    """A fleet plan: the fleet's metrics and lines, each model's metrics side by side, then each
    model's own plan (metrics, pools, routes) as a single-model plan prints."""
    t = Table(title="per model (BCR in SLA requests per USD)")
    for col in ("model", "BCR", "cost USD/h", "goodput req/s", "TTFT P90 s", "TPOT s", "WAN Gbit/s"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for name, m in plan.models.items():
        t.add_row(name, f"{m.bcr_requests_per_usd:.2f}", f"{m.cost_usd_per_h:.2f}", f"{m.goodput_rps:.3f}",
                  f"{m.ttft_p90_s:.3f}", f"{m.tpot_s:.4f}", f"{m.wan_gbit_per_s:.2f}")
    parts = [metrics_table(plan, f"fleet plan for {plan.scenario} (objective {plan.objective})"), t]
    if plan.links:
        parts.append(links_table(plan))
    from placer.fleet_links import split_with_links

    for name, part in split_with_links(plan, fleet).items():
        why = explain(fleet.member(name), part)
        parts += [metrics_table(part, f"model {name}"), pools_table(part, why), routes_table(part, why)]
    if plan.binding:
        parts.append(binding_table(plan))
    parts += [Text(f"note: {note}", style="dim") for note in plan.notes]
    return Group(*parts)


def _verified(problem, plan: Plan, rounds: int, config: SolveConfig, sim: SimConfig) -> Plan:
    """The plan after ``--verify``; InfeasiblePlanError (exit 3) when no round meets the SLA in simulation."""
    from placer.sim.verify import verify_plan

    outcome = verify_plan(problem, plan, rounds, config=sim, solve=config,
                          log=lambda msg: err.print(msg, highlight=False, markup=False, soft_wrap=True))
    if not outcome.holds:
        raise InfeasiblePlanError(f"--verify could not make the simulated P90 TTFT meet the SLA: {outcome.reason}")
    return outcome.plan


def _write(path: Path | None, text: str) -> None:
    if path is None:
        return
    try:
        path.write_text(text + "\n")
    except OSError as e:
        fail(InputError(f"--out: cannot write {str(path)!r}: {e.strerror}"))


def measured_for(scenario: Scenario, profiles: str | None) -> dict | None:
    """The measured figures and tables for the scenario's chips: from ``--profiles`` when
    given (it replaces the scenario's ``profiles:``), else from the scenario's list; None
    when neither names one. 'latest' reads the service database."""
    sources = [profiles] if profiles else list(scenario.profiles)
    if not sources:
        return None
    chips = {chip for dc in scenario.datacenters for chip in dc.inventory}
    return measured_from_all(sources, chips=chips, latest=latest_from_database)
