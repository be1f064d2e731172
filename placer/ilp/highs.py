"""HiGHS MILPs through OR-Tools MathOpt: the one HiGHS interface here that takes a warm start.

in:  a :class:`~placer.ilp.model.LinearModel` with integer variables, a time limit, gaps and
     an optional hint (a full solution, e.g. the previous Dinkelbach round's plan)
out: :class:`~placer.ilp.backends.SolveResult`, every MathOpt termination mapped to a Status

Why: pywraplp's HiGHS interface (OR-Tools 9.15) crashes the process on ``SetHint``, so a
Dinkelbach round could not start from the previous round's plan and HiGHS had to find an
incumbent again before proving the bound. MathOpt hands the hint to HiGHS as a starting
solution (HiGHS checks it and drops it if it is infeasible), which on the bundled
examples roughly halves the proving round. MathOpt also reports HiGHS's proven dual bound.
LPs stay on pywraplp (:mod:`placer.ilp.backends`).
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


def _hints(model: LinearModel, xs: list, hint: list[float] | None) -> list:
    """``hint`` as MathOpt's solution hint, each value moved into its variable's bounds (HiGHS
    rejects a start outside them with an error) and integers rounded."""
    from ortools.math_opt.python import mathopt

    if hint is None:
        return []
    values = {}
    for v, x, h in zip(model.vars, xs, hint):
        h = min(max(float(h), v.lb), v.ub)
        values[x] = float(round(h)) if v.integer else h
    return [mathopt.SolutionHint(variable_values=values)]


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
              abs_gap: float, restarts: bool = True, sub_mips: bool = True) -> SolveResult:
    """Solve the MILP ``model`` with HiGHS via MathOpt, starting from ``hint`` when given.

    ``time_limit_s`` covers building the MathOpt model too; stops at ``mip_gap`` (relative)
    or ``abs_gap`` (absolute), whichever comes first; ``restarts``: HiGHS's ``mip_allow_restart``,
    ``sub_mips``: its sub-MIP heuristics (:data:`SUB_MIP_HEURISTICS`; see the notes above)."""
    from ortools.math_opt.python import mathopt  # lazily, as pywraplp: `placer --help` stays fast

    start = time.perf_counter()
    m = mathopt.Model.from_model_proto(model_proto(model))
    xs = [m.get_variable(i) for i in range(len(model.vars))]
    left_s = time_limit_s - (time.perf_counter() - start)  # the hand-over counts against the limit
    if left_s <= 0:
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, time.perf_counter() - start, "ortools-highs")
    from ortools.math_opt.solvers import highs_pb2

    params = mathopt.SolveParameters(time_limit=datetime.timedelta(seconds=left_s), relative_gap_tolerance=mip_gap,
                                     absolute_gap_tolerance=abs_gap, enable_output=False,
                                     highs=highs_pb2.HighsOptionsProto(bool_options=highs_options(restarts, sub_mips)))
    try:
        with quiet_stdout():  # HiGHS writes some diagnostics to fd 1 even with output off: keep --json clean
            result = mathopt.solve(m, mathopt.SolverType.HIGHS, params=params,
                                   model_params=mathopt.ModelSolveParameters(solution_hints=_hints(model, xs, hint)))
    # MathOpt raises RuntimeError on a HiGHS error (OR-Tools 9.15's error path can raise
    # AttributeError while building it): a rejected hint must never cost the solve, and any
    # other error is a Status, as every backend's.
    except (RuntimeError, AttributeError):
        if hint is None:
            return SolveResult(Status.ERROR, [], math.nan, math.nan, time.perf_counter() - start, "ortools-highs")
        return solve_mip(model, time_limit_s - (time.perf_counter() - start), None, mip_gap, abs_gap, restarts,
                         sub_mips)
    seconds = time.perf_counter() - start
    status = Status[_TERMINATIONS.get(result.termination.reason.name, "ERROR")]
    if status.has_solution and not result.has_primal_feasible_solution():
        status = Status.NO_SOLUTION
    if not status.has_solution:
        return SolveResult(status, [], math.nan, math.nan, seconds, "ortools-highs")
    by_var = result.variable_values()
    values = [by_var[x] for x in xs]
    return SolveResult(status, values, result.objective_value(), result.termination.objective_bounds.dual_bound,
                       seconds, "ortools-highs")
