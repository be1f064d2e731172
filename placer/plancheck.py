"""A plan checked before anything trusts it: every command and endpoint that reads a plan runs
this one check (evaluate, simulate, report, export, deploy and its ``--apply``, the executor's
``POST /plan``, ``placer plans import``).

in:  optionally a scenario (``placer.specs.Scenario`` or a resolved ``placer.problem.Problem``: anything
     with ``name``, ``datacenters`` [each ``name`` and ``inventory``], and ``workload.classes``
     or ``classes``) and a :class:`~placer.plan.Plan`
out: nothing, or the first problem as a typed error.

Without a scenario (:func:`check_plan_alone`), what the plan alone shows — InputError (exit 2,
HTTP 422): two pool rows name the same pool (model, role, datacenter, chip, tp); no pool that
prefills (P or A) with instances, for the plan or (a fleet) for one of its models — a plan whose
counts are all 0 is one; a number that is not finite anywhere in it (``1e999`` in JSON reads as
infinity). Negative link capacities and catch-up thresholds are refused by the plan's own field
types (:mod:`placer.plan`) when it is read.

With a scenario (:func:`check_plan`), the above and:

* InputError (exit 2, HTTP 422) — the plan does not fit this scenario's names:
  it was made for another scenario (``plan.scenario`` differs; callers that replay a
  plan against another scenario on purpose pass ``other_scenario=True``); two pool rows
  name the same pool (role, datacenter, chip, tp) — never merged silently; a pool in a
  datacenter the scenario lacks, or of a chip that datacenter has none of; a route from or
  to an unknown datacenter, or of an unknown request class.
* InfeasiblePlanError (exit 3) naming the inventory — the pools need more chips of a kind
  (Σ count × tp) than a datacenter holds.

Pure data, no solver; cheap enough for a plan with many rows (it never loops over instances).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from placer.errors import InfeasiblePlanError, InputError
from placer.pdd import PREFILL_ROLES
from placer.plan import Plan


def _classes(scenario: Any) -> set[str] | None:
    """Names of the scenario's request classes (None when it has only a trace)."""
    classes = getattr(scenario, "classes", None)
    if classes is None and getattr(scenario, "workload", None) is not None:
        classes = scenario.workload.classes
    return None if classes is None else {c.name for c in classes}


def single_model_plan(plan: Plan, command: str) -> Plan:
    """``plan``, or InputError when it is a fleet plan (rows naming a model): ``command`` takes one model."""
    models = sorted({row.model for row in (*plan.pools, *plan.routes) if row.model})
    if models:
        raise InputError(f"pools[].model: the plan is a fleet plan ({', '.join(models)}); {command} takes a "
                         "single-model plan")
    return plan


def check_plan(scenario: Any, plan: Plan, *, other_scenario: bool = False) -> None:
    """Raise the first way ``plan`` does not fit ``scenario`` (see the module docstring)."""
    if not other_scenario and plan.scenario != scenario.name:
        raise InputError(f"plan.scenario: the plan was made for scenario {plan.scenario!r}, not {scenario.name!r}; "
                         "plan this scenario, or set the plan's 'scenario' if it is meant for it")
    check_plan_alone(plan)
    _check_pools(scenario, plan)
    _check_routes(scenario, plan)
    check_inventory(scenario, plan)


def check_plan_or_alone(scenario: Any | None, plan: Plan, *, other_scenario: bool = False) -> None:
    """:func:`check_plan` when there is a scenario, else :func:`check_plan_alone`; a fleet scenario
    (``is_fleet``): the plan alone and the inventory every model shares (its names are checked per
    model where the fleet is split, :func:`placer.optimize.evaluate_fleet`)."""
    if scenario is None or getattr(scenario, "is_fleet", False):
        check_plan_alone(plan)
        if scenario is not None:
            check_inventory(scenario, plan)
    else:
        check_plan(scenario, plan, other_scenario=other_scenario)


def check_plan_alone(plan: Plan) -> None:
    """Raise the first problem ``plan`` shows without its scenario (see the module docstring):
    a repeated pool row, no pool that prefills (in a fleet: for some model), a number not finite."""
    seen: dict[tuple, int] = {}
    for i, pool in enumerate(plan.pools):
        key = (pool.model, pool.role, pool.datacenter, pool.chip, pool.tp)
        if key in seen:
            whose = f"model {pool.model} " if pool.model else ""
            raise InputError(f"pools[{i}] repeats pools[{seen[key]}] ({whose}{pool.role} {pool.datacenter} "
                             f"{pool.chip} tp{pool.tp}): give each pool one row with its whole count")
        seen[key] = i
    models = sorted({pool.model for pool in plan.pools if pool.model}) or [None]
    for model in models:
        if not any(pool.role in PREFILL_ROLES and pool.count > 0 for pool in plan.pools if pool.model == model):
            whose = f" for model {model}" if model else ""
            raise InputError(f"pools: the plan has no P (or aggregated A) pool with instances{whose}: nothing can "
                             "prefill (a plan whose counts are all 0 deploys nothing)")
    bad = _first_not_finite(plan.model_dump(), "")
    if bad is not None:
        where, value = bad
        raise InputError(f"{where}: not a finite number (got {value!r})")


def _first_not_finite(node: Any, where: str) -> tuple[str, float] | None:
    """(path, value) of the first float in ``node`` that is inf or NaN, or None."""
    stack = [(where, node)]
    while stack:  # iterative: a plan's extra keys may nest (as deep as the reader allows)
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "plan", value
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def _check_pools(scenario: Any, plan: Plan) -> None:
    inventory = {dc.name: dc.inventory for dc in scenario.datacenters}
    for i, pool in enumerate(plan.pools):
        if pool.datacenter not in inventory:
            raise InputError(f"pools[{i}].datacenter: unknown datacenter {pool.datacenter!r}; scenario "
                             f"{scenario.name!r} has {', '.join(inventory)}")
        if pool.count > 0 and not inventory[pool.datacenter].get(pool.chip):
            have = ", ".join(c for c, n in inventory[pool.datacenter].items() if n > 0) or "no chips"
            raise InputError(f"pools[{i}].chip: datacenter {pool.datacenter!r} has no {pool.chip!r} in its "
                             f"inventory (it has {have})")


def _check_routes(scenario: Any, plan: Plan) -> None:
    dcs = {dc.name for dc in scenario.datacenters}
    classes = _classes(scenario)
    for i, route in enumerate(plan.routes):
        for end in ("src", "dst"):
            if getattr(route, end) not in dcs:
                raise InputError(f"routes[{i}].{end}: unknown datacenter {getattr(route, end)!r}")
        if classes is not None and route.request_class not in classes:
            raise InputError(f"routes[{i}].request_class: unknown class {route.request_class!r}; scenario "
                             f"{scenario.name!r} has {', '.join(sorted(classes))}")


def check_inventory(scenario: Any, plan: Plan) -> None:
    """InfeasiblePlanError when the pools use more of a chip in a datacenter than its inventory (a fleet:
    every model's pools together)."""
    used: dict[tuple[str, str], int] = defaultdict(int)
    for pool in plan.pools:
        used[(pool.datacenter, pool.chip)] += pool.count * pool.tp
    for dc in scenario.datacenters:
        for chip, have in dc.inventory.items():
            need = used.get((dc.name, chip), 0)
            if need > have:
                rows = " + ".join(f"{p.role} {p.count}×tp{p.tp}" for p in plan.pools
                                  if p.datacenter == dc.name and p.chip == chip and p.count > 0)
                raise InfeasiblePlanError(f"inventory[{dc.name},{chip}]: the plan's pools need {need} {chip} "
                                          f"({rows}) but {dc.name} has {have}")
