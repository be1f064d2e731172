"""Solve a built formulation for one objective; BCR exactly by Dinkelbach iterations.

in:  a :class:`~placer.ilp.formulation.Formulation`, objective, backend, time limit
out: :class:`Outcome` (values, status, gap, seconds, iterations) or a typed error:
     :class:`InfeasiblePlanError` (names what binds) / :class:`SolveTimeoutError`.

Dinkelbach for max goodput(x)/cost(n): start with λ = an upper bound from the LP
relaxation (the first MILP then yields a good feasible plan, whose ratio is the first λ
from below) or a caller's warm-start ratio; solve
F(λ) = max goodput − λ·cost (a MILP, warm-started with the previous solution);
λ ← goodput/cost of the new solution; stop when F(λ) ≤ ε·λ·cost. λ increases
monotonically and converges superlinearly; each iteration is exact, so the last λ
is the optimal ratio (to the MIP gap). A final MILP picks, among plans at that
ratio, the one with the most goodput (no arbitrarily small plans).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from placer.errors import InfeasiblePlanError, SolveTimeoutError
from placer.flows import P, SLA_QUANTILE
from placer.ilp.backends import SolveResult, Status, solve
from placer.ilp.config import SolveConfig
from placer.ilp.data import Flow
from placer.ilp.formulation import Formulation

EPS = 1e-6
ABS_GAP = 1e-4  # req/s: Dinkelbach objectives approach 0, where only an absolute gap closes
REL_GAP = 5e-3  # target precision of the optimal ratio (the issue asks ≤ 1 %)
SEED_GAP = 0.02  # relative gap of the first MILP, whose plan only seeds λ
MAX_ITERATIONS = 30


@dataclass
class Outcome:
    values: list[float]
    status: str
    mip_gap: float
    seconds: float
    backend: str
    iterations: int
    ratio: float  # goodput per USD/h at the optimum (bcr objective), else nan


def _goodput(form: Formulation, values: list[float]) -> float:
    return sum(c * values[i] for i, c in form.goodput.items())


def _cost(form: Formulation, values: list[float]) -> float:
    return sum(c * values[i] for i, c in form.cost.items())


def _check(result: SolveResult, form: Formulation, limit: float) -> None:
    if result.status.has_solution:
        return
    if result.status is Status.NO_SOLUTION:
        raise SolveTimeoutError(limit)
    if result.status is Status.INFEASIBLE:
        raise InfeasiblePlanError(diagnose(form))
    raise RuntimeError(f"solver {result.backend} failed with status {result.status.value}")


def diagnose(form: Formulation) -> str:
    """A user-facing reason why no plan exists."""
    prob = form.problem
    if not any(q.role == P for q in form.pools):
        why = "; ".join(form.notes[:4]) or "no datacenter has enough chips"
        return f"no chip can host a prefill instance of {prob.model.name} ({why})"
    if not any(q.role != P for q in form.pools):
        why = "; ".join(form.notes[:4])
        return f"no chip can meet the TPOT SLA of {prob.tpot_s} s for {prob.model.name} ({why})"
    if not form.flows:
        return "no pipeline connects a prefill pool to a decode pool (check links and inventories)"
    required = form.model.vars[form.g].lb
    carry = _max_carry(form)
    if carry < required * (1 - 1e-6):
        binds = "inventory, power or WAN bandwidth" if form.problem.links else "inventory or power"
        return (f"the hardware can carry at most {carry:.3g} of the required {required:.3g} req/s even ignoring "
                f"the TTFT SLA: {binds} binds (or lower options.min_served_fraction)")
    return _sla_cause(form, required)


def _fastest(form: Formulation) -> dict[int, tuple[float, Flow]]:
    """Each class's fastest TTFT without queueing over every flow the model had, with that flow."""
    best: dict[int, tuple[float, Flow]] = {}
    for f, t in form.ttft_s.items():
        if f.k not in best or t < best[f.k][0]:
            best[f.k] = (t, f)
    return best


def _where(f: Flow) -> str:
    """Where a flow runs, in the user's words: its P pool, pipeline and (if it crosses) the line."""
    over = f" over the line {f.src}->{f.dst}" if f.crosses else ""
    return f"P {f.p.dc} {f.p.chip} tp{f.p.tp}, {f.pipeline}{over}"


def _sla_cause(form: Formulation, required: float) -> str:
    """Why the TTFT SLA binds: the classes that are late even with no queueing (their share beyond
    the 10 % the P90 allows), or else the class with the least slack and the load the SLA allows."""
    prob = form.problem
    sla = prob.ttft_p90_s
    fastest = _fastest(form)
    hopeless = sorted((k for k, (t, _) in fastest.items() if t > sla), key=lambda k: -fastest[k][0])
    share = sum(prob.classes[k].share for k in hopeless)
    if share > 1 - SLA_QUANTILE + 1e-9:
        t, f = fastest[hopeless[0]]
        names = ", ".join(prob.classes[k].name for k in hopeless)
        return (f"the TTFT SLA of {sla} s cannot be met: class {prob.classes[hopeless[0]].name} needs "
                f"{t:.3f} s even with no queueing at its fastest ({_where(f)}); classes {names} "
                f"({100 * share:.0f} % of requests) are late on every pool, more than the "
                f"{100 * (1 - SLA_QUANTILE):.0f} % a P90 SLA allows")
    k = min((k for k in fastest if k not in hopeless), key=lambda k: sla - fastest[k][0])
    t, f = fastest[k]
    waits = ("queueing at prefill and WAN transfers make" if any(g.crosses for g in form.flows)
             else "queueing at prefill makes")
    most = _max_carry(form, with_sla=True)
    within = f" (at most {most:.3g} req/s can meet it)" if most < required * (1 - 1e-6) else ""
    return (f"the TTFT P90 SLA of {sla} s cannot be met at {required:.3g} req/s{within}: {waits} more than "
            f"{100 * (1 - SLA_QUANTILE):.0f} % of requests late; the "
            f"tightest class, {prob.classes[k].name}, needs {t:.3f} s with no queueing at its fastest "
            f"({_where(f)}), leaving {sla - t:.3f} s for the queue")


def _max_carry(form: Formulation, with_sla: bool = False) -> float:
    """Most req/s the pools could carry (LP relaxation), with the SLA row dropped unless ``with_sla``."""
    m = form.model.relaxed()
    if not with_sla:
        m.rows = [r for r in m.rows if r.family != "sla"]
    m.set_bounds(form.g, 0.0, m.vars[form.g].ub)
    m.maximize, m.objective = True, {form.g: 1.0}
    res = solve(m, "ortools", 30.0)
    return res.objective if res.status.has_solution else 0.0


def _left_s(deadline: float) -> float:
    """Seconds left before ``deadline`` (at least one: every solve gets some time)."""
    return max(1.0, deadline - time.perf_counter())


def _single_objective(form: Formulation, objective: str) -> tuple[bool, dict[int, float]]:
    """(maximise?, coefficients) of an objective solved by one MILP."""
    if objective == "min-cost":
        return False, dict(form.cost)
    if objective == "max-goodput":
        # tie-break toward the cheaper plan among those of equal goodput
        return True, {**{i: c for i, c in form.goodput.items()}, **{i: -1e-6 * c for i, c in form.cost.items()}}
    # max-served, for baselines that cannot meet the SLA: the most load carried at all
    return True, {form.g: 1.0, **{i: -1e-6 * c for i, c in form.cost.items()}}


def _solve_once(form: Formulation, config: SolveConfig, mip_gap: float, start: float, deadline: float) -> Outcome:
    """min-cost, max-goodput or max-served: one MILP."""
    model = form.model
    model.maximize, model.objective = _single_objective(form, config.objective)
    res = solve(model, config.backend, _left_s(deadline), mip_gap=mip_gap)
    _check(res, form, config.time_limit_s)
    if config.objective == "max-goodput" and _goodput(form, res.values) <= EPS:
        raise InfeasiblePlanError(diagnose(form))
    return Outcome(res.values, res.status.value, res.gap, time.perf_counter() - start, res.backend, 1, math.nan)


def solve_objective(form: Formulation, config: SolveConfig, mip_gap: float = 1e-4,
                    warm_ratio: float | None = None) -> Outcome:
    """Solve ``form`` for ``config.objective`` in {"bcr", "min-cost", "max-goodput", "max-served"}.

    ``warm_ratio`` (bcr only): goodput per USD/h of a plan known to be feasible (e.g. the
    one deployed now, evaluated on the new workload); Dinkelbach starts from it.
    """
    start = time.perf_counter()
    deadline = start + config.time_limit_s
    if config.objective in ("min-cost", "max-goodput", "max-served"):
        return _solve_once(form, config, mip_gap, start, deadline)
    if config.objective != "bcr":
        raise ValueError(f"objective must be bcr, min-cost or max-goodput, got {config.objective!r}")
    lam, from_above, least_cost = _first_ratio(form, warm_ratio)
    upper = lam if from_above and warm_ratio is None else None  # the LP relaxation's bound on the ratio
    state = _iterate(form, config, mip_gap, lam, from_above, deadline, least_cost, upper)
    return _most_goodput_at_ratio(form, config, mip_gap, state, start, deadline)


def _first_ratio(form: Formulation, warm_ratio: float | None) -> tuple[float, bool, float]:
    """λ0, whether it may lie above the optimum, and a lower bound on any plan's cost (USD/h).

    λ0 is the caller's warm start (the ratio of the plan deployed now, on the new
    workload) or the LP relaxation's ratio, an upper bound. The first MILP at λ0 returns
    a good feasible plan whatever side of the optimum λ0 lies on; its ratio is the first
    λ from below, where Dinkelbach's iterations are exact. The cost bound is the LP
    relaxation's least cost (or, with a warm start, one P and one decode instance).
    """
    if warm_ratio is not None and warm_ratio > 0:
        return warm_ratio, True, _min_cost(form)
    bound, least_cost = _lp_ratio_bound(form)
    if bound is None:
        raise InfeasiblePlanError(diagnose(form))
    least_cost = max(least_cost, _min_cost(form))
    return (bound, True, least_cost) if bound > 0 else (0.0, False, least_cost)


@dataclass
class _Dinkelbach:
    """Where the iterations stopped: λ (the best ratio), the last plan and its solve."""

    lam: float
    hint: list[float] | None
    res: SolveResult
    status: str
    gap: float
    iterations: int


def _iterate(form: Formulation, config: SolveConfig, mip_gap: float, lam: float, from_above: bool,
             deadline: float, least_cost: float, upper: float | None = None) -> _Dinkelbach:
    """Dinkelbach's iterations: maximise goodput − λ·cost, λ ← goodput/cost, until F(λ) ≈ 0.

    The reported gap bounds the ratio's relative error: every plan x has
    goodput(x)/cost(x) − λ = F(x)/cost(x) ≤ bound(F)/least_cost, so the gap is
    bound(F) / (λ · least_cost), with least_cost the LP relaxation's least cost — a lower
    bound on any feasible plan's cost, and far tighter than one P plus one decode instance.
    When the time limit ends a MILP before it finds a plan, the last plan stands, with
    status "feasible" and gap (upper − λ)/λ, ``upper`` being the LP relaxation's ratio bound."""
    model = form.model
    hint, status, gap, last = None, "optimal", 0.0, None
    model.maximize = True
    iterations = 0
    for iterations in range(1, MAX_ITERATIONS + 1):
        model.objective = dict(form.goodput)
        for i, c in form.cost.items():
            model.objective[i] = model.objective.get(i, 0.0) - lam * c
        # Stop each MILP once F(λ) is known within REL_GAP of the goodput at stake: the
        # ratio is then within that fraction of the optimum.
        abs_gap = max(ABS_GAP, REL_GAP * _goodput(form, hint)) if hint else ABS_GAP
        gap_rel = mip_gap
        if from_above:  # this MILP only has to find a good plan to seed λ: a loose gap will do
            abs_gap, gap_rel = max(abs_gap, SEED_GAP * form.problem.arrival_rps), SEED_GAP
        res = solve(model, config.backend, _left_s(deadline), hint=hint, mip_gap=gap_rel, abs_gap=abs_gap)
        if hint is not None and last is not None and res.status is Status.NO_SOLUTION:
            # out of time before this MILP found a plan: keep the last one, whose ratio is
            # within (LP bound − λ)/λ of the optimum when λ0 came from the LP relaxation
            status, res = "feasible", last
            gap = (upper - lam) / lam if upper and lam > 0 else math.inf
            break
        _check(res, form, config.time_limit_s)
        last = res
        if res.status is Status.FEASIBLE and not from_above:  # a seed stopped early is fine: exact steps follow
            status = "feasible"
        good, cost = _goodput(form, res.values), _cost(form, res.values)
        if good <= EPS or cost <= 0:
            if lam == 0.0 or from_above:
                raise InfeasiblePlanError(diagnose(form))
            break
        if from_above:  # the first plan: its ratio is the first λ from below
            lam, hint, from_above = good / cost, res.values, False
            continue
        f_value = good - lam * cost
        if f_value <= abs_gap or f_value <= EPS * lam * cost:
            # F(λ) ≤ bound: every plan has goodput/cost ≤ λ + bound/cost_min.
            gap = max(0.0, res.bound) / max(lam * least_cost, 1e-12)
            break
        lam, hint = good / cost, res.values
        if time.perf_counter() > deadline:
            status, gap = "feasible", res.gap
            break
    return _Dinkelbach(lam, hint, res, status, gap, iterations)


def _most_goodput_at_ratio(form: Formulation, config: SolveConfig, mip_gap: float, state: _Dinkelbach,
                           start: float, deadline: float) -> Outcome:
    """Among plans with the optimal ratio, the one with the most goodput (no arbitrarily small plans)."""
    model, res, best_ratio, status = form.model, state.res, state.lam, state.status
    g_var = model.vars[form.g]
    if g_var.lb >= g_var.ub:  # the load is fixed: nothing left to choose
        return Outcome(res.values, status, state.gap, time.perf_counter() - start, res.backend, state.iterations,
                       best_ratio)
    coeffs = {**form.goodput}
    for i, c in form.cost.items():
        coeffs[i] = coeffs.get(i, 0.0) - best_ratio * (1 - 1e-7) * c
    model.add("ratio_floor", "ratio_floor", coeffs, ">=", 0.0)
    model.objective = {**dict(form.goodput), **{i: -1e-6 * c for i, c in form.cost.items()}}
    final = solve(model, config.backend, _left_s(deadline), hint=state.hint, mip_gap=mip_gap)
    model.rows.pop()  # leave the formulation as built
    values = final.values if final.status.has_solution else (res.values if res else [])
    if final.status is Status.FEASIBLE:
        status = "feasible"
    return Outcome(values, status, state.gap, time.perf_counter() - start,
                   (final if final.status.has_solution else res).backend, state.iterations, best_ratio)


def _lp_ratio_bound(form: Formulation) -> tuple[float | None, float]:
    """An upper bound on goodput/cost (most goodput over the LP relaxation's least cost; None:
    infeasible), and that least cost (0 when unknown)."""
    m = form.model.relaxed()
    m.maximize, m.objective = False, dict(form.cost)
    cheapest = solve(m, "ortools", 30.0)
    if cheapest.status is Status.INFEASIBLE:
        return None, 0.0
    m.maximize, m.objective = True, dict(form.goodput)
    most = solve(m, "ortools", 30.0)
    if not (cheapest.status.has_solution and most.status.has_solution):
        return 0.0, 0.0  # the LP solver gave up: start from λ = 0, which is always valid
    cost = _cost(form, cheapest.values)
    if cost <= 0:  # no load is required: start from λ = 0 instead
        return 0.0, 0.0
    return _goodput(form, most.values) / cost, cost


def _min_cost(form: Formulation) -> float:
    """Cheapest possible plan: one P instance and one decode instance."""
    p = min((form.cost[v] for key, v in form.n.items() if key[0] == P), default=1.0)
    d = min((form.cost[v] for key, v in form.n.items() if key[0] != P), default=1.0)
    return p + d
