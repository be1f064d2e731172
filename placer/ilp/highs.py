"""HiGHS MILPs through OR-Tools MathOpt: the one HiGHS interface here that takes a warm start.

in:  a :class:`~placer.ilp.model.LinearModel` with integer variables, a time limit, gaps and
     an optional hint (a full solution, e.g. the previous Dinkelbach round's plan)
out: :class:`~placer.ilp.backends.SolveResult`, every MathOpt termination mapped to a Status

Why: pywraplp's HiGHS interface (OR-Tools 9.15) crashes the process on ``SetHint``, so a
Dinkelbach round could not start from the previous round's plan and HiGHS had to find an
incumbent again before proving the bound. MathOpt hands the hint to HiGHS as a starting
solution (HiGHS checks it and drops it if it is infeasible), which on the bundled
examples roughly halves the proving round. MathOpt also reports HiGHS's proven dual bound.
LPs go the same way (:func:`solve_lp`); SCIP stays on pywraplp (:mod:`placer.ilp.backends`).
"""

from __future__ import annotations

import datetime
import math
import time

from placer.ilp.backends import SolveResult, Status, quiet_stdout
from placer.ilp.model import LinearModel

#: MathOpt's termination reasons (by name) as backend statuses; reasons not listed are errors.
_TERMINATIONS = {
    "OPTIMAL": "OPTIMAL",
    "FEASIBLE": "FEASIBLE",  # a limit (time) stopped the search with an incumbent
    "NO_SOLUTION_FOUND": "NO_SOLUTION",  # a limit stopped it before any incumbent
    "INFEASIBLE": "INFEASIBLE",
    "UNBOUNDED": "UNBOUNDED",
    # HiGHS's presolve may not tell which; every placer model is bounded (G ≤ arrival bounds
    # every flow, inventory every count), so it is infeasible.
    "INFEASIBLE_OR_UNBOUNDED": "INFEASIBLE",
}


# Restarts (HiGHS's ``mip_allow_restart``, solve_mip's ``restarts``) are the caller's choice: HiGHS restarts
# each time reduced-cost fixing drops 10-25 % of the integer columns, re-running presolve, the
# root LP, cuts and a sub-MIP. For Dinkelbach's cold rounds (:mod:`placer.ilp.dinkelbach`) that
# costs more than it saves: pdd-two-dc's proving MILP took 0.31 s without restarts, 0.63 s with
# them; eight-dc's 8.4-9.0 s against 8.3-10.9 s; sixteen-dc's 81 s either way. The marginal-value
# re-solves (a proof from a known plan to a finer gap) gain from them: eight-dc's two took 23.7 s
# with restarts, 34.0 s without.
#
# Sub-MIP heuristics (``sub_mips``: HiGHS's RINS, RENS and root reduced-cost heuristics, each a
# smaller MILP solved inside the search to find better incumbents) are the caller's choice too. A
# Dinkelbach round that starts from a plan expected to be optimal only has to prove it, and on the
# bundled examples those sub-MIPs found nothing the tree did not, at a large share of the round:
# pdd-two-dc's proving MILP 0.25-0.27 s without them, 0.48-0.58 s with; its seed 0.76-1.14 s against
# 1.31-1.34 s (the same plan); eight-dc's proving MILP 3.8 s against 5.7 s (the same bound). Where the
# round must still search (the restricted rounds of placer.ilp.dinkelbach), they stay on: without them
# eight-dc's restricted round found a worse plan (F 2.24 against 2.49).
#: The HiGHS heuristics that solve a sub-MIP (``sub_mips=False`` turns them off).
SUB_MIP_HEURISTICS = ("mip_heuristic_run_rins", "mip_heuristic_run_rens", "mip_heuristic_run_root_reduced_cost")


def _hints(model: LinearModel, hint: list[float] | None) -> list:
    """``hint`` as MathOpt's solution hint protos (variable i has id i), each value moved into its variable's
    bounds (HiGHS rejects a start outside them with an error) and integers rounded."""
    from ortools.math_opt import model_parameters_pb2

    if hint is None:
        return []
    values = []
    for v, h in zip(model.vars, hint):
        h = min(max(float(h), v.lb), v.ub)
        values.append(float(round(h)) if v.integer else h)
    hinted = model_parameters_pb2.SolutionHintProto()
    hinted.variable_values.ids.extend(range(len(values)))
    hinted.variable_values.values.extend(values)
    return [hinted]


def model_proto(model: LinearModel):
    """``model`` as MathOpt's ModelProto, written column by column (variable i has id i, row j id j).

    Filling the proto's repeated fields directly takes ~0.06 s on eight-dc's 15 600 columns and
    100 000 non-zeros; adding them one expression at a time through MathOpt's Python objects took
    ~0.7 s, paid again by every MILP of a Dinkelbach run."""
    from ortools.math_opt import model_pb2

    proto = model_pb2.ModelProto(name="placer")
    var = proto.variables
    var.ids.extend(range(len(model.vars)))
    var.lower_bounds.extend(v.lb for v in model.vars)
    var.upper_bounds.extend(v.ub for v in model.vars)
    var.integers.extend(v.integer for v in model.vars)
    var.names.extend(v.name for v in model.vars)
    rows = proto.linear_constraints
    rows.ids.extend(range(len(model.rows)))
    rows.lower_bounds.extend(-math.inf if r.sense == "<=" else r.rhs for r in model.rows)
    rows.upper_bounds.extend(math.inf if r.sense == ">=" else r.rhs for r in model.rows)
    rows.names.extend(r.name for r in model.rows)
    matrix = proto.linear_constraint_matrix  # row-major, columns ascending within a row
    for j, row in enumerate(model.rows):
        cols = sorted(row.coeffs)
        matrix.row_ids.extend([j] * len(cols))
        matrix.column_ids.extend(cols)
        matrix.coefficients.extend(row.coeffs[i] for i in cols)
    objective = proto.objective
    objective.maximize = model.maximize
    cols = sorted(i for i, c in model.objective.items() if c != 0.0)
    objective.linear_coefficients.ids.extend(cols)
    objective.linear_coefficients.values.extend(model.objective[i] for i in cols)
    return proto


def highs_options(restarts: bool, sub_mips: bool) -> dict[str, bool]:
    """HiGHS's boolean options for one MILP: restarts and, unless ``sub_mips``, its sub-MIP heuristics off."""
    return {"mip_allow_restart": restarts, **({} if sub_mips else dict.fromkeys(SUB_MIP_HEURISTICS, False))}


def solve_mip(model: LinearModel, time_limit_s: float, hint: list[float] | None, mip_gap: float,
              abs_gap: float, restarts: bool = True, sub_mips: bool = True, cutoff: float | None = None) -> SolveResult:
    """Solve the MILP ``model`` with HiGHS via MathOpt, starting from ``hint`` when given.

    ``time_limit_s`` covers building the MathOpt model too; stops at ``mip_gap`` (relative)
    or ``abs_gap`` (absolute), whichever comes first; ``restarts``: HiGHS's ``mip_allow_restart``,
    ``sub_mips``: its sub-MIP heuristics (:data:`SUB_MIP_HEURISTICS`; see the notes above).
    ``cutoff`` (maximising): plans whose objective does not exceed it need not be found (:func:`_cut_off`); the
    bound returned is then at least ``cutoff``, and where nothing beats it the plan is ``hint``.

    The ModelProto goes to MathOpt's solver core as written and the result is read off its proto
    (variable i is id i): MathOpt's Python Model (built from the proto, exported back to one, a
    variable object per column to read the values by) cost ~0.5 s a MILP on sixteen-dc's 31 858 columns,
    ~1.5 s of its solve."""
    from ortools.math_opt import model_parameters_pb2
    from ortools.math_opt.solvers import highs_pb2

    start = time.perf_counter()
    proto = model_proto(model)
    doubles = _cut_off(proto, cutoff) if cutoff is not None else {}
    params = dict(relative_gap_tolerance=mip_gap, absolute_gap_tolerance=abs_gap,
                  highs=highs_pb2.HighsOptionsProto(bool_options=highs_options(restarts, sub_mips), double_options=doubles))
    model_params = model_parameters_pb2.ModelSolveParametersProto(solution_hints=_hints(model, hint))
    try:
        result = _core_solve(proto, time_limit_s - (time.perf_counter() - start), params, model_params)
    # the core raises StatusNotOk on a HiGHS error (MathOpt's wrapper turned it into a RuntimeError): a rejected
    # hint must never cost the solve, and any other error is a Status, as every backend's
    except Exception as err:  # noqa: BLE001 - StatusNotOk is no RuntimeError; anything else is re-raised
        if not _solver_error(err):
            raise
        if hint is None:
            return SolveResult(Status.ERROR, [], math.nan, math.nan, time.perf_counter() - start, "ortools-highs")
        return solve_mip(model, time_limit_s - (time.perf_counter() - start), None, mip_gap, abs_gap, restarts,
                         sub_mips, cutoff)
    seconds = time.perf_counter() - start
    if result is None:
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, seconds, "ortools-highs")
    status, primal = _status(result)
    if cutoff is not None and hint is not None and status is Status.INFEASIBLE:  # nothing beats the cutoff
        return _the_hint(model, hint, Status.OPTIMAL, cutoff, seconds)
    sign = -1.0 if cutoff is not None and model.maximize else 1.0  # _cut_off turned a maximisation around
    if cutoff is not None and hint is not None and status is Status.NO_SOLUTION:
        known = result.termination.HasField("objective_bounds")  # no field: no bound proven (never its default 0)
        return _out_of_time(model, hint, cutoff, sign * _dual_bound(result) if known else math.nan, seconds)
    if not status.has_solution:
        return SolveResult(status, [], math.nan, math.nan, seconds, "ortools-highs")
    objective, bound = sign * primal.objective_value, sign * _dual_bound(result)
    if cutoff is not None:  # what the cutoff pruned is proven no better than it (HiGHS reports only the rest)
        bound = max(bound, cutoff) if model.maximize else min(bound, cutoff)
    return SolveResult(status, _values(primal, len(model.vars)), objective, bound, seconds, "ortools-highs")


def _out_of_time(model: LinearModel, hint: list[float], cutoff: float, dual: float, seconds: float) -> SolveResult:
    """A round with a cutoff that a limit stopped before it found a plan beating it: HiGHS drops a hint that does not
    beat its objective bound, so it has no plan, but its dual bound (where it has one) bounds every plan that beats the
    cutoff, and the hint (the last plan) stands — FEASIBLE with the bound max(dual, cutoff), so the ceiling it proves
    reaches the caller (16 sites × 12 classes under a 30-s limit lost it: NO_SOLUTION, no bound, the LP's 13.6 % gap
    reported where the round had proven 7.4 %); no finite bound: NO_SOLUTION as before."""
    if not math.isfinite(dual):
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, seconds, "ortools-highs")
    return _the_hint(model, hint, Status.FEASIBLE, max(dual, cutoff) if model.maximize else min(dual, cutoff), seconds)


def _the_hint(model: LinearModel, hint: list[float], status: Status, bound: float, seconds: float) -> SolveResult:
    """The hint (the last plan, its counts rounded as HiGHS took them) as the result, with ``bound``."""
    values = [float(round(h)) if v.integer else float(h) for v, h in zip(model.vars, hint)]
    return SolveResult(status, values, model.objective_value(values), bound, seconds, "ortools-highs")


def solve_lp(model: LinearModel, time_limit_s: float) -> SolveResult:
    """Solve the LP ``model`` (no integer column) with HiGHS's interior point then crossover (a vertex), through
    MathOpt's core as the MILPs. The LP relaxations went through pywraplp's HiGHS with the same method before
    (:data:`placer.ilp.backends.LP_METHOD`): on the three examples' least-cost relaxations the same values to the
    last digit, sixteen-dc's 1.39 -> 0.92 s, and pywraplp (40-110 ms to import) is no longer loaded to plan. Only
    an optimal LP is a solution (its least cost bounds every plan's): a stop short of it is NO_SOLUTION."""
    from ortools.math_opt import model_parameters_pb2, parameters_pb2

    start = time.perf_counter()
    proto = model_proto(model)
    try:
        result = _core_solve(proto, time_limit_s - (time.perf_counter() - start),
                             dict(lp_algorithm=parameters_pb2.LP_ALGORITHM_BARRIER),
                             model_parameters_pb2.ModelSolveParametersProto())
    except Exception as err:  # noqa: BLE001 - as solve_mip's
        if not _solver_error(err):
            raise
        return SolveResult(Status.ERROR, [], math.nan, math.nan, time.perf_counter() - start, "ortools-highs")
    seconds = time.perf_counter() - start
    status, primal = _status(result) if result is not None else (Status.NO_SOLUTION, None)
    if status is Status.FEASIBLE:
        status = Status.NO_SOLUTION
    if not status.has_solution:
        return SolveResult(status, [], math.nan, math.nan, seconds, "ortools-highs")
    value = primal.objective_value
    return SolveResult(status, _values(primal, len(model.vars)), value, value, seconds, "ortools-highs")


def _core_solve(proto, left_s: float, params: dict, model_params):
    """MathOpt's core solve of ``proto`` with HiGHS within ``left_s`` (None when nothing is left), output off."""
    from ortools.math_opt import callback_pb2, parameters_pb2
    from ortools.math_opt.core.python import solver

    if left_s <= 0:
        return None
    proto_params = parameters_pb2.SolveParametersProto(enable_output=False, **params)
    proto_params.time_limit.FromTimedelta(datetime.timedelta(seconds=left_s))
    with quiet_stdout():  # HiGHS writes some diagnostics to fd 1 even with output off: keep --json clean
        return solver.solve(proto, parameters_pb2.SOLVER_TYPE_HIGHS, parameters_pb2.SolverInitializerProto(),
                            proto_params, model_params, None, callback_pb2.CallbackRegistrationProto(), None, None)


def _solver_error(err: Exception) -> bool:
    """Whether ``err`` is the solver's (MathOpt's core raises pybind11_abseil's StatusNotOk)."""
    from pybind11_abseil.status import StatusNotOk

    return isinstance(err, (StatusNotOk, RuntimeError))


def _status(result):
    """(Status, the first primal solution or None) of a SolveResultProto: a solution only when it is feasible."""
    from ortools.math_opt import result_pb2, solution_pb2

    reason = result_pb2.TerminationReasonProto.Name(result.termination.reason).removeprefix("TERMINATION_REASON_")
    status = Status[_TERMINATIONS.get(reason, "ERROR")]
    primal = result.solutions[0].primal_solution if result.solutions else None
    if status.has_solution and (primal is None or primal.feasibility_status != solution_pb2.SOLUTION_STATUS_FEASIBLE):
        status = Status.NO_SOLUTION
    return status, primal


def _values(primal, n: int) -> list[float]:
    """A primal solution's values by column (a sparse vector: the ids it leaves out are 0)."""
    values = [0.0] * n
    for i, x in zip(primal.variable_values.ids, primal.variable_values.values):
        values[i] = x
    return values


def _cut_off(proto, cutoff: float) -> dict[str, float]:
    """HiGHS's double options that prune every node whose bound does not beat ``cutoff`` (its ``objective_bound``),
    ``proto`` turned into a minimisation where it maximises: HiGHS reads that bound in its own sense (it minimises),
    so a minimisation reads the same whatever HiGHS does with a maximisation's.

    A proving round of :mod:`placer.ilp.dinkelbach` needs only that no plan beats the last by more than its absolute
    gap: with that as the cutoff, HiGHS fixes by reduced cost every pool that cannot, and its restarts drop them and
    their flows (sixteen-dc's proving MILP: 31 858 columns down to ~530 in 8 restarts, 19 s -> 6.5 s on 2 loaded
    cores; the gap it certifies is the same)."""
    if proto.objective.maximize:
        proto.objective.maximize = False
        values = proto.objective.linear_coefficients.values
        values[:] = [-v for v in values]
        cutoff = -cutoff
    return {"objective_bound": cutoff}


def _dual_bound(result) -> float:
    """The proven bound of a SolveResultProto (in its termination; older solvers put it in the stats)."""
    if result.termination.HasField("objective_bounds"):
        return result.termination.objective_bounds.dual_bound
    return result.solve_stats.best_dual_bound
