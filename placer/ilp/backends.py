"""Solver backends: OR-Tools (HiGHS through MathOpt's core, :mod:`placer.ilp.highs`; SCIP, and HiGHS for
SCIP's LPs, through pywraplp) and PuLP (CBC).

in:  a :class:`~placer.ilp.model.LinearModel`, a time limit, an optional hint
out: :class:`SolveResult` with every solver status mapped to :class:`Status`
"""

from __future__ import annotations

import contextlib
import enum
import math
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass

from placer.errors import InputError, SolverError
from placer.ilp.model import LinearModel


class Status(enum.Enum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # stopped (time limit) with an incumbent
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    NO_SOLUTION = "no_solution"  # stopped before any incumbent
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass
class SolveResult:
    status: Status
    values: list[float]
    objective: float
    bound: float  # best proven bound on the objective (== objective when optimal)
    seconds: float
    backend: str

    @property
    def gap(self) -> float:
        if not self.status.has_solution:
            return math.inf
        denom = max(abs(self.objective), 1e-9)
        return abs(self.bound - self.objective) / denom


BACKENDS = ("ortools", "ortools-highs", "ortools-scip", "pulp")
#: HiGHS's method for LPs through pywraplp (the "ortools-scip" backend's; "ortools" sends them to :func:`placer.ilp.highs.solve_lp`):
#: interior point then crossover (a vertex solution still) — on the 16-DC example's relaxation
#: about 3x less CPU than dual simplex, which stalls on its many near-parallel flow columns.
LP_METHOD = "ipm"


def solve(model: LinearModel, backend: str = "ortools", time_limit_s: float = 30.0,
          hint: list[float] | None = None, mip_gap: float = 1e-4, abs_gap: float = 1e-6,
          restarts: bool = True, sub_mips: bool = True, cutoff: float | None = None) -> SolveResult:
    """Solve ``model`` with ``backend`` ("ortools" = HiGHS, which on these models is 5-20×
    faster than SCIP: MILPs and LPs through MathOpt's core, whose MILPs take ``hint`` as a warm start
    (:mod:`placer.ilp.highs`); "ortools-scip" keeps SCIP, through pywraplp, its LPs on pywraplp's HiGHS).

    ``time_limit_s`` covers handing the model to the solver as well as the search (on large
    models the hand-over alone takes seconds); a limit used up by the hand-over returns
    NO_SOLUTION without searching. Every solver outcome maps to a :class:`Status`; this
    function raises only for an unknown backend or one missing from the build. ``restarts``:
    whether HiGHS may restart a MILP's root search, ``sub_mips``: whether it may run its sub-MIP heuristics
    (:mod:`placer.ilp.highs`; other backends ignore both); ``cutoff``: HiGHS need not find plans no better
    than it, the bound it returns is then at least it (:func:`placer.ilp.highs.solve_mip`; other backends ignore it).
    A large model's solve is ended at the limit from outside (:mod:`placer.ilp.guard`)."""
    from placer.ilp import guard

    return guard.within(_solve, model, backend, time_limit_s, hint, mip_gap, abs_gap, restarts, sub_mips, cutoff)


def _solve(model: LinearModel, backend: str, time_limit_s: float, hint: list[float] | None, mip_gap: float,
           abs_gap: float, restarts: bool, sub_mips: bool = True, cutoff: float | None = None) -> SolveResult:
    """:func:`solve` in this process."""
    if backend == "ortools-scip":
        return _solve_ortools(model, time_limit_s, hint, mip_gap, abs_gap)
    if backend in ("ortools", "ortools-highs"):
        from placer.ilp import highs  # it imports this module's SolveResult

        if any(v.integer for v in model.vars):
            return highs.solve_mip(model, time_limit_s, hint, mip_gap, abs_gap, restarts, sub_mips, cutoff)
        return highs.solve_lp(model, time_limit_s)
    if backend == "pulp":
        return _solve_pulp(model, time_limit_s, mip_gap, abs_gap)
    raise InputError(f"solver: unknown backend {backend!r}; known: {', '.join(BACKENDS)}")


#: quiet_stdout's state: how many solves are inside it now and the real stdout they will get
#: back. Solves may run in threads at once (the two LP relaxations of Dinkelbach's ratio bound):
#: the first one in silences fd 1 and the last one out restores it, so no solve can "restore"
#: another's /dev/null.
_QUIET_LOCK = threading.Lock()
_quiet = {"depth": 0, "saved": -1}


@contextlib.contextmanager
def quiet_stdout():
    """Silence C++ solver chatter written straight to file descriptor 1 (HiGHS prints
    progress lines there even with output off), so `--json` stays parseable. Safe to enter
    from several threads at once."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no real stdout (e.g. captured)
        yield
        return
    with _QUIET_LOCK:
        if _quiet["depth"] == 0:
            sys.stdout.flush()
            _quiet["saved"] = os.dup(fd)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        _quiet["depth"] += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _quiet["depth"] -= 1
            if _quiet["depth"] == 0:
                os.dup2(_quiet["saved"], fd)
                os.close(_quiet["saved"])


def _solve_ortools(model: LinearModel, time_limit_s: float, hint, mip_gap: float, abs_gap: float) -> SolveResult:
    """The "ortools-scip" backend through pywraplp: a MILP on SCIP (``hint`` its start), an LP on HiGHS by
    :data:`LP_METHOD` (GLOP reports ABNORMAL on some of these LPs; HiGHS solves them)."""
    from ortools.linear_solver import pywraplp

    start = time.perf_counter()
    has_int = any(v.integer for v in model.vars)
    engine = "SCIP" if has_int else "HIGHS"
    name = f"ortools-{engine.lower()}"
    solver = pywraplp.Solver.CreateSolver(engine)
    if solver is None:
        raise SolverError(name, "not in this OR-Tools build", 0.0, "choose another --solver")
    error = solver.LoadModelFromProto(_mp_model(model))
    if error:
        raise SolverError(name, f"the model was refused: {error}", 0.0)
    xs, obj = solver.variables(), solver.Objective()
    solver.SuppressOutput()
    left_s = time_limit_s - (time.perf_counter() - start)  # building a large model counts against the limit
    if left_s <= 0:
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, time.perf_counter() - start, name)
    solver.SetTimeLimit(max(1, int(left_s * 1000)))
    params = pywraplp.MPSolverParameters()
    if has_int:
        if hint is not None:
            solver.SetHint(xs, [float(h) for h in hint])
        params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, mip_gap)
        # Dinkelbach objectives approach 0 at the optimum, where a relative gap never
        # closes: stop also on an absolute gap.
        solver.SetSolverSpecificParametersAsString(f"limits/absgap = {abs_gap}\n")
    else:
        solver.SetSolverSpecificParametersAsString(f"solver = {LP_METHOD}\noutput_flag = false\n")
    solve_start = time.perf_counter()
    with quiet_stdout():
        code = solver.Solve(params)
    status = _ortools_status(pywraplp, code, time.perf_counter() - solve_start, left_s)
    seconds = time.perf_counter() - start
    if not status.has_solution:
        return SolveResult(status, [], math.nan, math.nan, seconds, name)
    value = obj.Value()
    bound = obj.BestBound() if has_int else value  # a MILP's "optimal" is within the gap asked for: its bound
    return SolveResult(status, [x.solution_value() for x in xs], value, bound, seconds, name)


def _mp_model(model: LinearModel):
    """``model`` as pywraplp's MPModelProto (variable i is column i, row j constraint j), written field by field: one
    SetCoefficient call per non-zero took ~0.5 s of sixteen-dc's LP relaxation (247 000 non-zeros), the proto ~0.2 s;
    the solver gets the same model in the same order (the same LP solution)."""
    from ortools.linear_solver import linear_solver_pb2

    proto = linear_solver_pb2.MPModelProto(maximize=model.maximize)
    objective = model.objective
    add = proto.variable.add
    for i, v in enumerate(model.vars):
        add(lower_bound=v.lb, upper_bound=v.ub, is_integer=v.integer, name=v.name,
            objective_coefficient=objective.get(i, 0.0))
    add = proto.constraint.add
    for row in model.rows:
        lo, hi = {"<=": (-math.inf, row.rhs), ">=": (row.rhs, math.inf), "==": (row.rhs, row.rhs)}[row.sense]
        ct = add(lower_bound=lo, upper_bound=hi, name=row.name)
        ct.var_index.extend(row.coeffs.keys())
        ct.coefficient.extend(row.coeffs.values())
    return proto


#: An ABNORMAL stop this close to the time limit (share of it) is the limit's doing.
TIME_LIMIT_SHARE = 0.9


def _ortools_status(pywraplp, code: int, seconds: float, time_limit_s: float) -> Status:
    """pywraplp's result code as a :class:`Status`. HiGHS through pywraplp reports ABNORMAL (not
    NOT_SOLVED) when its time limit ends the search before an incumbent: within
    :data:`TIME_LIMIT_SHARE` of the limit that is NO_SOLUTION (a time-out), else ERROR."""
    status = {
        pywraplp.Solver.OPTIMAL: Status.OPTIMAL,
        pywraplp.Solver.FEASIBLE: Status.FEASIBLE,
        pywraplp.Solver.INFEASIBLE: Status.INFEASIBLE,
        pywraplp.Solver.UNBOUNDED: Status.UNBOUNDED,
        pywraplp.Solver.NOT_SOLVED: Status.NO_SOLUTION,
    }.get(code, Status.ERROR)
    if status is Status.ERROR and seconds >= TIME_LIMIT_SHARE * time_limit_s:
        return Status.NO_SOLUTION
    return status


def _solve_pulp(model: LinearModel, time_limit_s: float, mip_gap: float, abs_gap: float) -> SolveResult:
    with warnings.catch_warnings():
        # PuLP 3.x deprecates, for 4.0, the construction style and the bundled CBC this
        # backend uses; we pin pulp<4 and use them on purpose.
        warnings.simplefilter("ignore", DeprecationWarning)
        return _solve_pulp_inner(model, time_limit_s, mip_gap, abs_gap)


def _solve_pulp_inner(model: LinearModel, time_limit_s: float, mip_gap: float, abs_gap: float) -> SolveResult:
    import pulp

    start = time.perf_counter()
    prob = pulp.LpProblem("placer", pulp.LpMaximize if model.maximize else pulp.LpMinimize)
    xs = [
        pulp.LpVariable(
            f"x{v.index}",
            lowBound=v.lb,
            upBound=None if v.ub == math.inf else v.ub,
            cat=pulp.LpInteger if v.integer else pulp.LpContinuous,
        )
        for v in model.vars
    ]
    prob += pulp.lpSum(c * xs[i] for i, c in model.objective.items())
    for k, row in enumerate(model.rows):
        expr = pulp.lpSum(c * xs[i] for i, c in row.coeffs.items())
        if row.sense == "<=":
            prob += (expr <= row.rhs, f"r{k}")
        elif row.sense == ">=":
            prob += (expr >= row.rhs, f"r{k}")
        else:
            prob += (expr == row.rhs, f"r{k}")
    left_s = time_limit_s - (time.perf_counter() - start)  # building a large model counts against the limit
    if left_s <= 0:
        return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, time.perf_counter() - start, "pulp-cbc")
    # CBC takes whole seconds: round down (at least one), so the limit is not overrun by up to a second
    solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=max(1, int(left_s)), gapRel=mip_gap, gapAbs=abs_gap)
    prob.solve(solver)
    seconds = time.perf_counter() - start
    code = pulp.LpStatus[prob.status]
    has_values = all(x.varValue is not None for x in xs)
    if code == "Optimal" and has_values:
        status = Status.OPTIMAL if prob.sol_status in (pulp.LpSolutionOptimal,) else Status.FEASIBLE
    elif code == "Infeasible":
        status = Status.INFEASIBLE
    elif code == "Unbounded":
        status = Status.UNBOUNDED
    elif has_values and code == "Not Solved":
        status = Status.FEASIBLE
    else:
        status = Status.NO_SOLUTION
    if not status.has_solution:
        return SolveResult(status, [], math.nan, math.nan, seconds, "pulp-cbc")
    values = [float(x.varValue) for x in xs]
    value = model.objective_value(values)
    return SolveResult(status, values, value, value, seconds, "pulp-cbc")
