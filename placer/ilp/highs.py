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


def solve_mip(model: LinearModel, time_limit_s: float, hint: list[float] | None, mip_gap: float,
              abs_gap: float) -> SolveResult:
    """Solve the MILP ``model`` with HiGHS via MathOpt, starting from ``hint`` when given.

    ``time_limit_s`` covers building the MathOpt model too; stops at ``mip_gap`` (relative)
    or ``abs_gap`` (absolute), whichever comes first."""
    from ortools.math_opt.python import mathopt  # lazily, as pywraplp: `placer --help` stays fast

    start = time.perf_counter()
    m = mathopt.Model(name="placer")
    xs = [m.add_variable(lb=v.lb, ub=v.ub, is_integer=v.integer, name=v.name) for v in model.vars]
    for row in model.rows:
        lo, hi = {"<=": (-math.inf, row.rhs), ">=": (row.rhs, math.inf), "==": (row.rhs, row.rhs)}[row.sense]
        m.add_linear_constraint(lb=lo, ub=hi, expr=mathopt.fast_sum(c * xs[i] for i, c in row.coeffs.items()),
                                name=row.name)
    m.set_objective(mathopt.fast_sum(c * xs[i] for i, c in model.objective.items()), is_maximize=model.maximize)
    left_s = time_limit_s - (time.perf_counter() - start)  # the hand-over counts against the limit
    if left_s <= 0:
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, time.perf_counter() - start, "ortools-highs")
    params = mathopt.SolveParameters(time_limit=datetime.timedelta(seconds=left_s), relative_gap_tolerance=mip_gap,
                                     absolute_gap_tolerance=abs_gap, enable_output=False)
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
        return solve_mip(model, time_limit_s - (time.perf_counter() - start), None, mip_gap, abs_gap)
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
