"""`optimize`: scenario → plan. The one function the CLI, the API and the jobs call.

in:  a Scenario (or resolved Problem), objective, solver backend, time limit
out: a :class:`~placer.plan.Plan` whose metrics come from :mod:`placer.evaluate` at the
     plan's actual utilisations and which has passed :func:`placer.validate.validate`. A trace scenario's
     routes are priced at what its own routing leaves the far decoders holding (:mod:`placer.decode_rounds`); a
     plan that misses the SLA with decoders waiting for KV is re-solved with less load on them (:mod:`placer.kv_repair`).

A fleet scenario (``models:``, a :class:`~placer.problem.FleetProblem`) goes to
:func:`~placer.optimize_fleet.optimize_fleet` / :func:`~placer.optimize_fleet.evaluate_fleet`
(:mod:`placer.optimize_fleet`, importable from here too): one MILP over every model
(:mod:`placer.ilp.fleet`), each model's plan extracted as a single model's, joined into the
fleet's plan (rows tagged with their model, ``models`` metrics) and checked by
:func:`placer.validate.validate_fleet`.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

from placer import decode_rounds, kv_repair
from placer.errors import InfeasiblePlanError, InputError, PlacerError, SolveTimeoutError
from placer.evaluate import analyze, link_uses
from placer.ilp.backends import solve
from placer.ilp.config import OBJECTIVES, SolveConfig, building_within
from placer.ilp import local_first
from placer.ilp.dinkelbach import Outcome, solve_objective
from placer.ilp.p_cuts import uncached_tokens
from placer.flows import decode_context_tokens, instance, pool_shape
from placer.pdd import ADAPTIVE, AGG, P_D, RLD, D, P
from placer.ilp.formulation import Architecture, Formulation, build, pdd_architecture
from placer.fleetplan import reject_models
from placer.marginals import binding_rows, priced, relaxed, warm_ratio
from placer.plancheck import check_plan
from placer.plan import Assignment, Binding, Handoff, Plan, PoolKey, PoolOut, Route, SolverInfo
from placer.problem import FleetProblem, Problem, resolve
from placer.queue_laws import tail_notes
from placer.profiles.measured import source_of_prompt, source_of_step
from placer.shapes import kind_of
from placer.slacheck import sla_status
from placer.specs import Scenario
from placer.validate import validate

__all__ = ["OBJECTIVES", "SolveConfig", "as_problem", "evaluate_plan", "optimize", "optimize_fleet",
           "solve_architecture"]
RPS_EPS = 1e-6  # below solver tolerance: noise, not traffic


def as_problem(scenario: Scenario | Problem, measured: dict | None = None) -> Problem:
    return scenario if isinstance(scenario, Problem) else resolve(scenario, measured)


def extract(form: Formulation, outcome: Outcome, objective: str) -> Plan:
    """Turn solver values into a Plan (pools, routes, assignments) with metrics."""
    prob, v = form.problem, outcome.values
    counts = {key: int(round(v[var])) for key, var in form.n.items()}
    batch = {q.key: d.batch for q, d in form.decode.items()}
    busy: dict[tuple, float] = defaultdict(float)  # P pool: prefill seconds per second
    routes: dict[tuple, float] = defaultdict(float)
    assignments, uncached = [], uncached_tokens(prob)
    for f, rate in form.rates(v).items():
        # Solver tolerance leaves ~1e-6 req/s on pools rounded to zero instances: noise.
        if rate <= RPS_EPS or counts[f.p.key] == 0 or v[form.tier[f.p]] <= RPS_EPS:
            continue
        busy[f.p.key] += rate * form.prefill_s[(f.k, f.p)]
        name = prob.classes[f.k].name
        routes[(name, f.pipeline, f.src, f.dst)] += rate
        assignments.append(Assignment(request_class=name, pipeline=f.pipeline, role=f.p.role, datacenter=f.p.dc,
                                      chip=f.p.chip, tp=f.p.tp, shape=kind_of(f.p.tp), dst=f.dst, rps=rate,
                                      queue=f.p.queue,
                                      queue_instances=v[form.tier[f.p]], uncached_tokens=uncached[f.k]))
    for (k, pipe, d, q), i in form.z.items():
        if v[i] <= RPS_EPS or counts[q.key] == 0:
            continue
        assignments.append(Assignment(request_class=prob.classes[k].name, pipeline=pipe, role=q.role,
                                      datacenter=q.dc, chip=q.chip, tp=q.tp, shape=kind_of(q.tp),
                                      dst=d if q.role == RLD else None, rps=v[i]))
    stages = {k: instance(prob, k.chip, k.tp).pp for k in counts}
    pools = [PoolOut(role=k.role, datacenter=k.datacenter, chip=k.chip, tp=k.tp, shape=kind_of(k.tp), count=c,
                     design_batch=batch.get(k), pp=stages[k] if stages[k] > 1 else None,
                     planned_utilization=round(busy[k] / c, 4) if k.role == P else None)
             for k, c in counts.items() if c > 0]
    plan = Plan(
        scenario=prob.name,
        objective=objective,
        engine=prob.engine,
        pools=pools,
        routes=[Route(request_class=k[0], pipeline=k[1], src=k[2], dst=k[3], rps=r) for k, r in sorted(routes.items())],
        handoff=Handoff(mode=ADAPTIVE, catch_up_threshold_tokens=prob.options.catch_up_threshold_tokens),
        solver=SolverInfo(backend=outcome.backend, status=outcome.status, mip_gap=outcome.mip_gap,
                          seconds=outcome.seconds, iterations=outcome.iterations, **model_size(form)),
        assignments=assignments,
        notes=list(form.notes) + profile_notes(prob, pools),
    )
    return with_metrics(prob, plan)


def model_size(form: Formulation) -> dict[str, int]:
    """The MILP's size as the plan's solver object reports it (additive keys): columns, integer columns, rows."""
    m = form.model
    return {"columns": len(m.vars), "integer_columns": m.integer_columns(), "rows": len(m.rows)}


def profile_notes(problem: Problem, pools: list[PoolOut]) -> list[str]:
    """The profiles the plan used and, per pool, where its prefill or decode figures came
    from: a measured table (naming its profile) or the roofline × efficiency. Nothing when
    no profile was given (every figure is then the roofline's)."""
    if not problem.profiles_used:
        return []
    notes = [f"calibrated with {p}" for p in problem.profiles_used]
    notes += [f"ignored {why}" for why in problem.tables_ignored]
    context = decode_context_tokens(problem.classes)
    for pool in pools:
        im = instance(problem, pool.chip, pool.tp)
        if pool.role == P:
            sources = {source_of_prompt(im, c.input_tokens, c.hit_rate) for c in problem.classes}
            what = "prefill " + ", ".join(sorted(sources))
        else:
            batch = max(1, im.max_batch(context, problem.tpot_s))
            what = f"decode step at batch {batch}, context {context:.0f}: {source_of_step(im, batch, context)}"
        notes.append(f"pool {pool.role} {pool.datacenter} {pool.chip} tp{pool.tp}: {what}")
    return notes


def with_metrics(problem: Problem, plan: Plan) -> Plan:
    """``plan`` with its metrics (and whether they meet the SLA: :func:`placer.slacheck.sla_status`),
    line use and the analysis's notes."""
    analysis = analyze(problem, plan)
    met, misses = sla_status(problem, analysis)
    metrics = analysis.metrics.model_copy(update={"sla_met": met, "sla_misses": misses or None})
    notes = list(dict.fromkeys([*plan.notes, *analysis.problems, *tail_notes(problem, plan)]))
    return plan.model_copy(update={"metrics": metrics, "links": link_uses(problem, analysis), "notes": notes})


def solve_architecture(problem: Problem, arch: Architecture, config: SolveConfig = SolveConfig(),
                       warm_ratio: float | None = None,
                       feasible_start: dict[str, float] | None = None) -> tuple[Plan, Formulation, Outcome]:
    with building_within(config):  # a build that outlives --time-limit ends as exit 4
        form = build(problem, arch, config.objective)
    outcome = solve_objective(form, config, warm_ratio=warm_ratio, feasible_start=feasible_start)
    return extract(form, outcome, config.objective), form, outcome


def _solve_local_first(problem: Problem, arch: Architecture, config: SolveConfig) -> tuple[Plan, Formulation, Outcome]:
    """A large problem's local plan first (:mod:`placer.ilp.local_first`), the whole model's Dinkelbach from it;
    out of time before that, the local plan ("feasible", its gap from :func:`placer.ilp.starts.capacity_bound`)."""
    began = time.perf_counter()
    local = local_first.local_plan(problem, arch, config, began)
    if local is None:
        return solve_architecture(problem, arch, config)
    try:
        return solve_architecture(problem, arch, config, feasible_start=local.by_name)
    except SolveTimeoutError:
        gap = (local.ceiling - local.ratio) / local.ratio if local.ceiling else math.inf
        outcome = Outcome(local.values, "feasible", max(0.0, gap), time.perf_counter() - began, local.backend, 0,
                          local.ratio)
        return extract(local.form, outcome, "bcr"), local.form, outcome


def optimize(scenario: Scenario | Problem, config: SolveConfig = SolveConfig(), measured: dict | None = None,
             warm_start: Plan | None = None, warm_evaluated: Plan | None = None) -> Plan:
    """The PDD plan for ``scenario`` under ``config.objective`` (see placer.ilp.formulation).

    ``measured``: chip name -> measured efficiency fields (see placer.problem.resolve).
    ``warm_start``: a plan (e.g. the one deployed now); its BCR on this scenario seeds
    the Dinkelbach iterations (bcr objective), so a re-solve after a small drift is short;
    ``warm_evaluated``: that plan already evaluated here (:func:`evaluate_plan`, ``other_scenario``).

    ``config.time_limit_s`` bounds the whole call (started here unless the caller started
    it): the warm start's evaluation, every Dinkelbach MILP and LP, and the marginal-value
    re-solves share one deadline. Out of time with a plan, the best one so far comes back
    (``solver.status`` "feasible", ``solver.mip_gap`` its ratio gap; marginals not yet
    priced say "not computed (time limit)"); without one, SolveTimeoutError (exit 4).
    Building the MILP is not interruptible: on very large scenarios it alone may pass the limit.

    A fleet scenario (``models:``) is planned jointly by :func:`optimize_fleet` (no warm start).
    """
    if isinstance(scenario, FleetProblem) or (isinstance(scenario, Scenario) and scenario.is_fleet):
        from placer.optimize_fleet import optimize_fleet

        return optimize_fleet(scenario, config, measured)
    start = time.perf_counter()
    config = config.check().started()
    objective = config.objective
    problem = as_problem(scenario, measured)
    _needs_budget(problem, objective)
    warm_ratio = None
    if warm_evaluated is not None and objective == "bcr":
        m = warm_evaluated.metrics
        warm_ratio = m.goodput_rps / m.cost_usd_per_h if m.cost_usd_per_h else None
    elif warm_start is not None and objective == "bcr":
        try:
            warm = evaluate_plan(problem, warm_start.model_copy(update={"routes": [], "assignments": []}), config,
                                 other_scenario=True)
            warm_ratio = warm.metrics.goodput_rps / warm.metrics.cost_usd_per_h if warm.metrics.cost_usd_per_h else None
        except PlacerError:
            warm_ratio = None  # the old plan does not fit the new scenario: solve cold
    arch = pdd_architecture(problem)

    def solve_at(prob: Problem, cfg: SolveConfig) -> tuple[Plan, Formulation, Outcome]:
        return (_solve_local_first(prob, arch, cfg) if objective == "bcr" and warm_ratio is None
                and local_first.worth_it(prob) else solve_architecture(prob, arch, cfg, warm_ratio))

    if decode_rounds.wanted(problem):  # a trace: KV priced at what the plan's routing leaves the decoders
        (plan, form, outcome), problem, config = decode_rounds.settle(problem, solve_at, config, with_metrics)
    else:
        plan, form, outcome = solve_at(problem, config)
    # a plan that misses the SLA with decoders waiting for KV: re-solved with less load on them (placer.kv_repair)
    (plan, form, outcome), problem = kv_repair.repair(problem, (plan, form, outcome), solve_at, config)
    issues = validate(problem, plan)
    if issues:
        plan = plan.model_copy(update={"notes": [*plan.notes, *[f"validate: {i}" for i in issues]]})
    if config.marginals and objective == "bcr":
        plan = plan.model_copy(update={"binding": binding_with_marginals(problem, form, outcome, plan, config)})
    else:
        plan = plan.model_copy(update={"binding": [Binding(constraint=r, marginal="not computed")
                                                   for r in binding_rows(form, outcome)]})
    # solver.seconds: the whole budget this command used so far (build, solves, marginals), so a
    # later --verify on the same budget (verify_plan) knows what is left
    solver = plan.solver.model_copy(update={"seconds": time.perf_counter() - start})
    return plan.model_copy(update={"solver": solver})


def binding_with_marginals(problem: Problem, form: Formulation, outcome: Outcome, plan: Plan,
                           config: SolveConfig) -> list[Binding]:
    """Binding rows with what one more unit of the resource would add to BCR (by re-solving
    within what is left of ``config``'s budget; a row reached with less than
    :data:`placer.marginals.MARGINAL_MIN_S` left is "not computed (time limit)").

    Each re-solve starts Dinkelbach from the plan itself: loosening a row keeps the plan feasible,
    so its values (matched by variable name) are a start from below, and the LP bound and the
    seed MILP are skipped (where the loosened model names the plan's variables differently, e.g. a
    looser SLA's other queue tiers, from the plan's ratio as a warm start)."""
    warm = warm_ratio(outcome)
    start = {var.name: value for var, value in zip(form.model.vars, outcome.values)}
    return priced(binding_rows(form, outcome), lambda row: relaxed(problem, row, plan),
                   lambda other, cfg: solve_architecture(other, form.arch, cfg, warm_ratio=warm,
                                                         feasible_start=start)[0],
                   plan, config, "BCR")


def _needs_budget(problem: Problem, objective: str) -> None:
    if objective == "max-goodput" and problem.options.budget_usd_per_h is None:
        raise InputError("objective max-goodput needs options.budget_usd_per_h in the scenario")


def _pinned(problem: Problem, plan: Plan) -> Formulation:
    """The MILP of ``problem`` with ``plan``'s pool counts fixed, its routes' rates kept (only their
    split over pools free) or, without routes, every routing open; objective: SLA goodput."""
    roles = {p.role for p in plan.pools if p.count > 0}
    arch = (Architecture("evaluate", (P_D,), drc=False) if D in roles
            else pdd_architecture(problem, AGG in roles or None))
    form = build(problem, arch, "bcr")
    m = form.model
    wanted = {PoolKey(p.role, p.datacenter, p.chip, pool_shape(problem, p.chip, p.tp)): p.count for p in plan.pools
              if p.count > 0}
    have = {q.key for q in form.pools}
    missing = [k for k in wanted if k not in have]
    if missing:
        k = missing[0]
        why = "; ".join(n for n in form.notes if n.startswith(f"{k.chip} tp{k.tp}")) or \
            "no such chip in that datacenter's inventory, or not a candidate for that role"
        raise InfeasiblePlanError(f"pool {k.role} {k.datacenter} {k.chip} tp{k.tp} cannot be used: {why}")
    for key, var in form.n.items():
        m.fix(var, wanted.get(key, 0))
    m.set_bounds(form.g, 0.0, problem.arrival_rps)
    if plan.routes:
        m.rows = [r for r in m.rows if r.family != "demand"]
        total = 0.0
        names = [c.name for c in problem.classes]
        carriers = {(names[k], pipe, s, d): idx for (k, pipe, s, d), idx in form.columns.routes().items()}
        for r in plan.routes:
            idx = carriers.get((r.request_class, r.pipeline, r.src, r.dst))
            if not idx:
                raise InfeasiblePlanError(f"route {r.request_class} {r.pipeline} {r.src}->{r.dst} has no pools "
                                          "or link to run on")
            m.add(f"route[{r.request_class},{r.pipeline},{r.src}->{r.dst}]", "route", {i: 1.0 for i in idx},
                  "==", r.rps)
            total += r.rps
        covered = {(r.request_class, r.pipeline, r.src, r.dst) for r in plan.routes}
        for route, idx in carriers.items():
            if route not in covered:
                for i in idx:
                    m.fix(i, 0.0)
        m.set_bounds(form.g, total, total)
    m.maximize = True
    m.objective = dict(form.goodput)
    return form


def evaluate_plan(scenario: Scenario | Problem, plan: Plan, config: SolveConfig = SolveConfig(),
                  measured: dict | None = None, other_scenario: bool = False) -> Plan:
    """Metrics of a given plan without re-optimising its pools.

    The plan is first checked against the scenario (:func:`placer.plancheck.check_plan`:
    names, duplicate pool rows, inventory; ``other_scenario`` allows a plan made for
    another scenario). Pool counts are fixed. When the plan has routes, their rates are kept and only the
    split over pools is chosen; pools without routes get the routing that carries the
    most SLA goodput. A plan whose routes its pools cannot carry is infeasible
    (the message names the rows that break). A fleet scenario's plan goes to :func:`evaluate_fleet`.
    """
    if isinstance(scenario, FleetProblem) or (isinstance(scenario, Scenario) and scenario.is_fleet):
        from placer.optimize_fleet import evaluate_fleet

        return evaluate_fleet(scenario, plan, config, measured, other_scenario)
    problem = as_problem(scenario, measured)
    reject_models(plan, problem.name)
    check_plan(problem, plan, other_scenario=other_scenario)
    form = _pinned(problem, plan)
    res = solve(form.model, config.backend, max(0.001, config.started().left_s()))
    if not res.status.has_solution:
        raise InfeasiblePlanError("the plan's pools cannot carry its routes within capacity, memory, link "
                                  "and SLA limits (rows: p_capacity, decode_slots, link, sla[ttft_p90])")
    outcome = Outcome(res.values, res.status.value, res.gap, res.seconds, res.backend, 1, math.nan)
    out = extract(form, outcome, plan.objective)
    issues = validate(problem, out)
    notes = [*out.notes, *[f"validate: {i}" for i in issues]]
    return out.model_copy(update={"handoff": plan.handoff, "notes": notes})


#: The fleet's entry points live in :mod:`placer.optimize_fleet`; imported from here as before.
_FLEET = ("as_fleet", "evaluate_fleet", "fleet_marginals", "fleet_plan", "optimize_fleet")


def __getattr__(name: str):
    if name in _FLEET:
        from placer import optimize_fleet

        return getattr(optimize_fleet, name)
    raise AttributeError(f"module 'placer.optimize' has no attribute {name!r}")
