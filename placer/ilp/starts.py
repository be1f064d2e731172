"""Where Dinkelbach starts: the LP relaxation's ratio bound, a caller's plan, the LP rounded to a plan.

in:  a built :class:`~placer.ilp.formulation.Formulation` and the solve's :class:`~placer.ilp.config.SolveConfig`
out: :func:`_first_ratio` (λ0 and the least cost, from a caller's ratio or :func:`_lp_ratio_bound`: an upper
     bound on goodput/cost, the LP's least cost and its least-cost solution), :func:`_bound_beside` (a large
     model's bound beside a caller's plan), :func:`_feasible_start` (a caller's plan as a start from below), :func:`_rounded_start`
     (that LP solution rounded to a plan, :mod:`placer.ilp.rounding`), :class:`_Dinkelbach` (where the
     iterations stand) and the small helpers both this module and :mod:`placer.ilp.dinkelbach` use
     (goodput, cost, time left, progress reports).

Split from :mod:`placer.ilp.dinkelbach`, which runs the iterations (``_first_ratio`` and ``_bound_beside`` moved
here from it too, to keep it under ~400 lines; tests and ``bench/bench_planner.py`` reach them here).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from placer.errors import InfeasiblePlanError, SolveTimeoutError
from placer.ilp.backends import SolveResult, Status, solve
from placer.ilp.config import Progress, SolveConfig
from placer.ilp.diagnose import diagnose
from placer.ilp.formulation import Formulation
from placer.ilp.local_decoders import in_least_cost, unjudged
from placer.ilp.rounding import rounded_plan
from placer.pdd import P

EPS = 1e-6
LP_LIMIT_S = 30.0  # most seconds one LP relaxation (ratio bound, diagnosis) may take
# A plan first (issue 47): models with at least this many integer columns round the LP to a plan
# (:mod:`placer.ilp.rounding`) before any MILP — the first MILP there may find none in the whole
# budget (100 sites × 12 classes, 2 858 integer columns: no plan in 10 minutes) — within ROUND_SHARE
# of what is left. Smaller ones (sixteen-dc: 305; 16 sites × 12 classes: 447) get their first plan
# from the restricted seed MILP in seconds, ~12 % better than the rounding's (sixteen-dc: 1019 against
# 896 req/USD), so they round only when that MILP ends without a plan, with what is left.
ROUND_FIRST_INTEGERS = 1000
ROUND_SHARE = 0.25
#: The backend names of starts made outside the MILPs: a caller's plan and the LP rounded.
START_BACKEND, ROUNDING_BACKEND = "start", "rounding"


def _goodput(form: Formulation, values: list[float]) -> float:
    return sum(c * values[i] for i, c in form.goodput.items())


def _cost(form: Formulation, values: list[float]) -> float:
    return sum(c * values[i] for i, c in form.cost.items())


def _f_objective(form: Formulation, lam: float) -> dict[int, float]:
    """Dinkelbach's objective at λ by column: goodput − λ·cost (F(λ) is its maximum)."""
    out = dict(form.goodput)
    for i, c in form.cost.items():
        out[i] = out.get(i, 0.0) - lam * c
    return out


def _goodput_floor(form: Formulation) -> float:
    """The least goodput any plan has (req/s on time; 0 where the model has no SLA row): every plan serves
    G ≥ G's lower bound, Σ_f x_f = Σ_k s_k·G (C1), and at most (1 − SLA_QUANTILE)·G of it late (C11), so its goodput
    Σ_f (1 − late_f)·x_f is at least (Σ_k s_k − (1 − SLA_QUANTILE))·G_min — read off the model's own rows; a fleet's
    is its members' sum. It bounds the cost of a plan at ratio r from below, by floor / r (:func:`_ceiling`)."""
    members = getattr(form, "members", None)
    if members:
        return sum(_floor_of(mem.form, form.model.vars[mem.offset + mem.form.g].lb) for mem in members)
    return _floor_of(form, form.model.vars[form.g].lb)


def _floor_of(form: Formulation, g_min: float) -> float:
    """:func:`_goodput_floor` of one model's rows: (C1)'s shares and (C11)'s late share, at G = ``g_min``."""
    sla = [r for r in form.model.rows if r.family == "sla"]
    demand = [r for r in form.model.rows if r.family == "demand"]
    if len(sla) != 1 or len(demand) != len(form.problem.classes) or g_min <= 0:
        return 0.0
    late_share = -sla[0].coeffs.get(form.g, 0.0)
    shares = sum(-r.coeffs.get(form.g, 0.0) for r in demand)
    return max(0.0, (shares - late_share) * g_min)


def _ceiling(lam: float, bound: float, least_cost: float, floor: float) -> float:
    """The highest ratio a plan may have when goodput − λ·cost ≤ ``bound`` for every plan (a MILP's proven bound):
    a plan at ratio r > λ has (r − λ)·cost ≤ bound, so r ≤ λ + bound/least_cost (any plan costs at least the LP's
    least cost), and goodput·(1 − λ/r) ≤ bound, so r ≤ λ/(1 − bound/floor) (:func:`_goodput_floor`: its goodput is at
    least that) — the lower of the two; inf when neither is known. The second is the tighter near the optimum
    wherever floor > λ·least_cost: on 16 sites × 12 classes 108 req/s against λ·least_cost = 102.5 (the LP's least
    cost 1,300.8 USD/h, 12 % under the plan's 1,479.0)."""
    bound = max(0.0, bound)
    out = lam + bound / least_cost if least_cost > 0 else math.inf
    if floor > bound:
        out = min(out, lam / (1 - bound / floor))
    return out


def _lp_limit_s(config: SolveConfig | None) -> float:
    """Time for one LP relaxation: what is left of the budget, within [1, 30] s (an LP of these
    models takes well under a second; the floor lets a diagnosis finish after a time-out)."""
    return LP_LIMIT_S if config is None else min(LP_LIMIT_S, max(1.0, config.left_s()))


def _left_s(config: SolveConfig) -> float:
    """Seconds the next MILP may take; SolveTimeoutError when the budget is spent (callers
    that hold a plan check :meth:`SolveConfig.spent` first and keep it)."""
    left = config.left_s()
    if left <= 0:
        raise SolveTimeoutError(config.time_limit_s)
    return left


def _report(config: SolveConfig, phase: str, ratio: float | None, ceiling: float | None, began: float) -> None:
    """The caller's progress callback with BCR units (SLA requests per USD: ratio × 3600)."""
    if config.progress is None:
        return
    gap = (ceiling - ratio) / ratio if ratio and ceiling and ceiling < math.inf else math.inf
    config.report(Progress(phase, None if ratio is None else 3600 * ratio,
                           None if ceiling is None or ceiling == math.inf else 3600 * ceiling,
                           max(0.0, gap), time.perf_counter() - began))


def _rounded_start(form: Formulation, config: SolveConfig, cheapest: list[float], upper: float | None,
                   began: float, share: float = ROUND_SHARE) -> _Dinkelbach | None:
    """The LP's least-cost solution rounded to a plan (:mod:`placer.ilp.rounding`) as a Dinkelbach
    start from below (None when rounding finds none), within ``share`` of what is left; the LP's without the local
    decoder rows where its LP had them (``form.plain_lp``). Its dive opens sites beyond the LP's only on a large
    model (:data:`ROUND_FIRST_INTEGERS`), whose first plan it is."""
    limit = share * config.left_s()
    if limit <= 0:
        return None
    site_of = {var: (key[1], key[2]) for key, var in form.n.items()}
    values = rounded_plan(form.model, list(form.n.values()), form.cost, form.goodput, form.plain_lp or cheapest, limit,
                          site_of, open_sites=form.model.integer_columns() >= ROUND_FIRST_INTEGERS)
    if values is None:
        return None
    good, cost = _goodput(form, values), _cost(form, values)
    if good <= EPS or cost <= 0:
        return None
    gap = max(0.0, (upper - good / cost) / (good / cost)) if upper else math.inf
    res = SolveResult(Status.FEASIBLE, values, good - (good / cost) * cost, math.nan, 0.0, ROUNDING_BACKEND)
    _report(config, "first plan", good / cost, upper, began)
    return _Dinkelbach(good / cost, values, res, "feasible", gap, 0)


@dataclass
class _Dinkelbach:
    """Where the iterations stopped: λ (the best ratio), the last plan and its solve."""

    lam: float
    hint: list[float] | None
    res: SolveResult
    status: str
    gap: float
    iterations: int


def _feasible_start(form: Formulation, values_by_name: dict[str, float]) -> _Dinkelbach | None:
    """``values_by_name`` as a start for Dinkelbach on ``form``, if it is a plan of it (no row or bound
    broken) with goodput; else None."""
    values = [values_by_name.get(v.name, 0.0) for v in form.model.vars]
    good, cost = _goodput(form, values), _cost(form, values)
    if good <= EPS or cost <= 0 or form.model.violations(values):
        return None
    res = SolveResult(Status.FEASIBLE, values, math.nan, math.nan, 0.0, START_BACKEND)
    return _Dinkelbach(good / cost, values, res, "optimal", math.inf, 0)


def _lp_ratio_bound(form: Formulation, config: SolveConfig,
                    covers: bool = False) -> tuple[float | None, float, list[float] | None]:
    """An upper bound on goodput/cost — the most load any plan may serve (G's upper bound: goodput
    counts each served request at most once) over the LP relaxation's least cost — and that least
    cost (0 when unknown), and the least-cost LP solution; None: the relaxation is infeasible. The
    LP gets what is left of the budget (SolveTimeoutError when nothing is).

    One LP, not two: the LP relaxation's most goodput was the other half of this bound before; it
    equals G's upper bound on eight-dc and sixteen-dc (94 % of it on pdd-two-dc), and the bound
    only places λ0 above the optimum (the first MILP seeds λ; exactness comes after it).

    The local decoder rows (C19, :mod:`placer.ilp.local_decoders`: every plan keeps them) go in where they matter
    (:func:`placer.ilp.local_decoders.in_least_cost`): then its least cost is a plan's that pays for a decoder where
    it prefills, and so are the sites the restricted seed starts from — on 16 sites × 12 classes a first plan at
    269.7-277.7 req/USD and 285.0 by 12 s, where without them the seed's sites gave 243.4 and the searching rounds
    reached 285.0 at 34 s; the bound 332.1 -> 322.1. ``covers``: the decode covers (C18) too, for a bound only
    (they move the cheapest sites away from a good seed: sixteen-dc 944 against 997 req/USD,
    :func:`placer.ilp.covers.take_covers`) — and, on a model of ``local_decoders.ALL_ROWS_INTEGERS`` or more, the
    local decoder rows, which are otherwise left out of its least-cost LP; 100 sites × 12 classes: 288.8 -> 279.2
    req/USD with both."""
    m = form.model.relaxed()
    if covers:
        m.rows.extend(form.covers)
    m.maximize, m.objective = False, dict(form.cost)
    # a large model's LP is the first plan's source (its rounding): it may take half the budget, not 30 s
    # (100 sites × 12 classes: the LP did not finish in 30 s, so no bound and no rounding)
    large = form.model.integer_columns() >= ROUND_FIRST_INTEGERS
    limit = max(LP_LIMIT_S, 0.5 * _left_s(config)) if large else LP_LIMIT_S
    cheapest = in_least_cost(form, m, lambda: solve(m, "ortools", min(limit, _left_s(config))),
                             lambda res: _cost(form, res.values), bound_only=covers)
    if cheapest.status is Status.INFEASIBLE:
        return None, 0.0, None
    if not cheapest.status.has_solution:
        return 0.0, 0.0, None  # the LP solver gave up: start from λ = 0, which is always valid
    cost = _cost(form, cheapest.values)
    if cost <= 0:  # no load is required: start from λ = 0 instead
        return 0.0, 0.0, None
    return form.model.vars[form.g].ub / cost, cost, cheapest.values


def _lp_sites(form: Formulation, config: SolveConfig, lam: float) -> set[tuple[str, str]] | None:
    """The sites (datacenter, chip) whose pools the LP relaxation of max goodput − λ·cost opens, the decode covers
    (C18) in it; None when the LP gives no solution in time. Unlike the least-cost LP's, these weigh goodput: on
    16 sites × 12 classes at λ = 265.2 req/USD they add dc-002's H800 (its tp32 P prefills the long classes on
    time), whose plan the least-cost sites lack (:func:`placer.ilp.dinkelbach._resited`)."""
    m = form.model.relaxed()
    m.rows.extend(form.covers)
    m.maximize, m.objective = True, _f_objective(form, lam)
    res = solve(m, "ortools", min(_lp_limit_s(config), _left_s(config)))
    if not res.status.has_solution:
        return None
    return {(key[1], key[2]) for key, var in form.n.items() if res.values[var] > 1e-6}


@contextmanager
def _on_sites(form: Formulation, sites: set) -> Iterator[list[int]]:
    """``form``'s model with every pool count outside ``sites`` (datacenter, chip) fixed at 0 (yields those
    counts), as built again after it: the restricted rounds of :mod:`placer.ilp.dinkelbach`."""
    outside = [var for key, var in form.n.items() if (key[1], key[2]) not in sites]
    model = form.model
    saved = [model.vars[var] for var in outside]
    for var in outside:
        model.set_bounds(var, 0.0, 0.0)
    try:
        yield outside
    finally:
        for var in saved:
            model.vars[var.index] = var


def _min_cost(form: Formulation) -> float:
    """Cheapest possible plan: one P instance and one decode instance."""
    p = min((form.cost[v] for key, v in form.n.items() if key[0] == P), default=1.0)
    d = min((form.cost[v] for key, v in form.n.items() if key[0] != P), default=1.0)
    return p + d


def capacity_bound(form: Formulation, admits: Callable[[int, Any], bool] | None = None) -> float | None:
    """A ceiling on goodput/cost (per USD/h) from the capacity rows alone, in milliseconds where the LP
    relaxation of a large model takes minutes; None for models with aggregated pools (not derived for them).
    ``admits(k, q)``: whether class k may be prefilled on P queue q (default every admitted pair; a
    baseline's variant read off a larger relaxed model narrows it, :mod:`placer.baselines.threshold`).

    Every served request of class k is prefilled on some P queue p — (C3) and (C0) give n_p ≥ Σ pre[k,p]·x / u,
    u the pool's highest tier — and decodes its O_k tokens on some decode pool q — (C6): n_q ≥ Σ z·O_k·t_q /
    (u·B_q) (MD or D; RLD for a filtered request). So a plan serving G req/s costs at least G·c with c =
    Σ_k s_k (min_p price_p·pre[k,p]/u_p + min_q price_q·O_k·t_q/(u·B_q)), P and decode pools being apart; its
    goodput is at most G, so its ratio is at most 1/c, whatever G. Weak (no SLA, mix, inventory or whole
    instances), but valid: a gap certified from the first plan on."""
    from placer.pdd import AGG, P

    if any(q.role == AGG for q in form.pools):
        return None
    problem, cap = form.problem, form.problem.options.utilization_cap
    price = {key: form.cost[var] for key, var in form.n.items()}
    top: dict = {}
    for q in form.pools:
        if q.role == P:
            top[q.key] = max(top.get(q.key, 0.0), q.util)
    per_request = 0.0
    for k, c in enumerate(problem.classes):
        prefill = [price[q.key] * form.prefill_s[(k, q)] / top[q.key] for q in form.pools
                   if q.role == P and (k, q) in form.prefill_s and top[q.key] > 0 and (admits is None or admits(k, q))]
        decode = [price[q.key] * c.output_tokens * d.step_s / (cap * d.batch) for q, d in form.decode.items()
                  if d.batch > 0]
        if not prefill or not decode:
            return None
        per_request += c.share * (min(prefill) + min(decode))
    return 1.0 / per_request if per_request > 0 else None


def _first_ratio(form: Formulation, warm_ratio: float | None,
                 config: SolveConfig) -> tuple[float, bool, float, list[float] | None]:
    """λ0, whether it may lie above the optimum, a lower bound on any plan's cost (USD/h), and the
    LP relaxation's least-cost solution (None with a warm start).

    λ0 is the caller's warm start (the ratio of the plan deployed now, on the new
    workload) or :func:`_lp_ratio_bound`, an upper bound. The first MILP at λ0 returns
    a good feasible plan whatever side of the optimum λ0 lies on; its ratio is the first
    λ from below, where Dinkelbach's iterations are exact. The cost bound is the LP
    relaxation's least cost (or, with a warm start, one P and one decode instance).
    """
    if warm_ratio is not None and warm_ratio > 0:
        unjudged(form)  # no least-cost LP to judge the local decoder rows (C19) by
        return warm_ratio, True, _min_cost(form), None
    bound, least_cost, cheapest = _lp_ratio_bound(form, config)
    if bound is None:
        raise InfeasiblePlanError(diagnose(form, _lp_limit_s(config)))
    least_cost = max(least_cost, _min_cost(form))
    return (bound, True, least_cost, cheapest) if bound > 0 else (0.0, False, least_cost, None)


def _capacity_beside(form: Formulation, upper: float | None, least_cost: float) -> tuple[float | None, float]:
    """``upper`` and ``least_cost`` narrowed by :func:`capacity_bound` (milliseconds: no LP)."""
    ceiling = capacity_bound(form)
    if ceiling is None:
        return upper, least_cost
    problem = form.problem
    served = problem.options.min_served_fraction * problem.arrival_rps
    return min(upper or ceiling, ceiling), max(least_cost, served / ceiling)


def _bound_beside(form: Formulation, config: SolveConfig, upper: float | None,
                  least_cost: float) -> tuple[float | None, float]:
    """The LP relaxation's ratio bound and least cost for a large model solved from a caller's plan (a
    small one needs neither: its MILPs prove the ratio in seconds); what it had when the LP gives none."""
    upper, least_cost = _capacity_beside(form, upper, least_cost)  # valid at once; the LP's is tighter
    try:
        bound, lp_cost, _ = _lp_ratio_bound(form, config, covers=True)
    except SolveTimeoutError:
        return upper, least_cost
    if not bound:
        return upper, least_cost
    return min(bound, upper or bound), max(least_cost, lp_cost)
