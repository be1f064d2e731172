"""`optimize` for a fleet: one MILP over every model of a ``models:`` scenario, and its evaluation.

in:  a fleet Scenario (or resolved :class:`~placer.problem.FleetProblem`), a :class:`SolveConfig`
out: the fleet's :class:`~placer.plan.Plan` — each model's plan extracted as a single model's
     (:func:`placer.optimize.extract`), joined (rows tagged with their model, ``models`` metrics) and
     checked by :func:`placer.validate.validate_fleet`; binding rows priced as :func:`placer.optimize.optimize`
     prices them. Split from :mod:`placer.optimize` (which still re-exports these names).
"""

from __future__ import annotations

import dataclasses
import math
import time

from placer.errors import InfeasiblePlanError, InputError
from placer.evaluate import fleet_metrics
from placer.fleetplan import join_rows, split_plan
from placer.ilp.backends import solve
from placer.ilp.config import SolveConfig, building_within
from placer.ilp.dinkelbach import Outcome, solve_objective
from placer.ilp.fleet import SEPARATOR, build_fleet
from placer.ilp.formulation import Formulation
from placer.marginals import binding_rows, priced, relaxed, warm_ratio
from placer.optimize import _needs_budget, _pinned, extract, model_size
from placer.plan import Binding, Plan, SolverInfo
from placer.plancheck import check_plan
from placer.problem import FleetProblem, resolve_fleet
from placer.specs import Scenario
from placer.validate import shared_hardware_issues, validate_fleet

__all__ = ["as_fleet", "evaluate_fleet", "fleet_marginals", "fleet_plan", "optimize_fleet"]


def as_fleet(scenario: Scenario | FleetProblem, measured: dict | None = None) -> FleetProblem:
    return scenario if isinstance(scenario, FleetProblem) else resolve_fleet(scenario, measured)


def fleet_plan(fleet: FleetProblem, parts: dict[str, Plan], objective: str, solver: SolverInfo) -> Plan:
    """The fleet's plan from each model's own plan: rows tagged with their model, lines summed, the
    fleet's metrics and each model's (``models``), and :func:`validate_fleet`'s findings as notes."""
    rows = join_rows(parts)
    metrics = fleet_metrics([(fleet.member(name), part) for name, part in parts.items()])
    misses = [miss.model_copy(update={"model": name}) for name, part in parts.items()
              for miss in part.metrics.sla_misses or []]
    metrics = metrics.model_copy(update={"sla_met": all(part.metrics.sla_met is not False for part in parts.values()),
                                         "sla_misses": misses or None})
    plan = Plan(scenario=fleet.name, objective=objective, engine=next(iter(parts.values())).engine, metrics=metrics,
                models={name: part.metrics for name, part in parts.items()},
                handoff=next(iter(parts.values())).handoff, solver=solver, **rows)
    issues = validate_fleet(fleet, plan)
    return plan.model_copy(update={"notes": [*plan.notes, *[f"validate: {i}" for i in issues]]})


def optimize_fleet(scenario: Scenario | FleetProblem, config: SolveConfig = SolveConfig(),
                   measured: dict | None = None, warm_ratio: float | None = None) -> Plan:
    """The joint plan of every model of a fleet (placer.ilp.fleet): the models share the
    datacenters' chips and power and the WAN lines; ``config.objective`` is the fleet's (bcr:
    the fleet's goodput per dollar). Binding rows get their marginal value as in :func:`optimize`
    (:func:`fleet_marginals`). ``warm_ratio``: a fleet ratio known feasible (bcr), as there."""
    start = time.perf_counter()
    config = config.check().started()
    fleet = as_fleet(scenario, measured)
    _needs_budget(fleet.shared, config.objective)
    with building_within(config):
        form = build_fleet(fleet, config.objective)
    outcome = solve_objective(form, config, warm_ratio=warm_ratio)
    parts = {mem.name: extract(mem.form, dataclasses.replace(outcome, values=mem.values(outcome.values)),
                               config.objective) for mem in form.members}
    solver = SolverInfo(backend=outcome.backend, status=outcome.status, mip_gap=outcome.mip_gap,
                        seconds=time.perf_counter() - start, iterations=outcome.iterations, **model_size(form))
    plan = fleet_plan(fleet, parts, config.objective, solver)
    if config.marginals and config.objective == "bcr":
        binding = fleet_marginals(fleet, form, outcome, plan, config)
    else:
        binding = [Binding(constraint=r, marginal="not computed") for r in binding_rows(form, outcome)]
    return plan.model_copy(update={"binding": binding})


def _fleet_relaxed(fleet: FleetProblem, row: str, plan: Plan) -> tuple[FleetProblem, str] | None:
    """The fleet with one binding resource loosened by one unit (:func:`placer.marginals.relaxed`'s
    units): a shared row (a line, a datacenter's chips or power) for every model, a model's own row (``name/…``,
    e.g. its SLA) for that model."""
    owner, sep, own = row.partition(SEPARATOR)
    if sep and owner in fleet.names:
        loose = relaxed(fleet.member(owner), own, split_plan(plan, fleet.names)[owner])
        if loose is None:
            return None
        members = {**dict(fleet.members), owner: loose[0]}
        return FleetProblem(fleet.name, tuple(members.items())), f"{owner}: {loose[1]}"
    loose = relaxed(fleet.shared, row, plan)
    if loose is None:
        return None
    other = loose[0]
    members = tuple((name, dataclasses.replace(p, links=other.links, datacenters=other.datacenters))
                    for name, p in fleet.members)
    return FleetProblem(fleet.name, members), loose[1]


def fleet_marginals(fleet: FleetProblem, form: Formulation, outcome: Outcome, plan: Plan,
                    config: SolveConfig) -> list[Binding]:
    """:func:`binding_with_marginals` for a fleet: each binding row with what one more unit adds to
    the fleet's BCR, by re-solving the fleet from the plan's own ratio within what is left of the budget."""
    warm = warm_ratio(outcome)
    return priced(binding_rows(form, outcome), lambda row: _fleet_relaxed(fleet, row, plan),
                   lambda other, cfg: optimize_fleet(other, cfg, warm_ratio=warm), plan, config, "fleet BCR")


def evaluate_fleet(scenario: Scenario | FleetProblem, plan: Plan, config: SolveConfig = SolveConfig(),
                   measured: dict | None = None, other_scenario: bool = False) -> Plan:
    """Metrics of a given fleet plan, as :func:`evaluate_plan` for each model's rows but in one
    MILP (placer.ilp.fleet): every model's pool counts fixed, its routes kept (or, where it gives
    none, the routing chosen jointly for the most fleet goodput), the shared lines summed. The
    shared chips and power are checked first (InfeasiblePlanError naming the datacenter and chip)."""
    config = config.started()
    fleet = as_fleet(scenario, measured)
    if not other_scenario and plan.scenario != fleet.name:
        raise InputError(f"plan.scenario: the plan was made for scenario {plan.scenario!r}, not {fleet.name!r}")
    parts = split_plan(plan, fleet.names)
    for name, part in parts.items():
        try:
            check_plan(fleet.member(name), part, other_scenario=True)
        except InputError as err:
            raise InputError(f"model {name}: {err}") from None
        except InfeasiblePlanError as err:
            raise InfeasiblePlanError(f"model {name}: {err}") from None
    shared = shared_hardware_issues(fleet, plan)
    if shared:
        raise InfeasiblePlanError(f"the models together exceed what they share: {'; '.join(shared)}")
    form = build_fleet(fleet, "bcr", lambda name, problem: _pinned(problem, parts[name]))
    form.model.set_bounds(form.g, 0.0, form.model.vars[form.g].ub)
    form.model.maximize, form.model.objective = True, dict(form.goodput)
    res = solve(form.model, config.backend, max(0.001, config.left_s()))
    if not res.status.has_solution:
        raise InfeasiblePlanError("the fleet plan's pools cannot carry its routes within capacity, memory, "
                                  "the shared lines and each model's SLA (rows: p_capacity, decode_slots, link, "
                                  "sla[ttft_p90])")
    outcome = Outcome(res.values, res.status.value, res.gap, res.seconds, res.backend, 1, math.nan)
    done = {mem.name: extract(mem.form, dataclasses.replace(outcome, values=mem.values(res.values)), plan.objective)
            for mem in form.members}
    out = fleet_plan(fleet, done, plan.objective, done[fleet.names[0]].solver)
    return out.model_copy(update={"handoff": plan.handoff})
