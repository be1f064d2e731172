"""A fleet plan's rows, split by model and joined again (pure data, no solver).

in:  a fleet plan (rows carrying ``model``) and the fleet's model names; or each model's own plan
out: each model's plan (``split_plan``: rows without ``model``, its ``metrics`` from
     ``plan.models``; each model's own use of the shared lines is ``placer.fleet_links``'s, which
     needs the flow physics the executor must not load), or the fleet's rows (``join_rows``: every
     row tagged with its model, notes prefixed, the shared lines' use summed)

Rules: in a fleet plan every pool, route and assignment names one of the scenario's models
(InputError naming the row and the models otherwise); a single-model plan names none
(``reject_models``).
"""

from __future__ import annotations

from collections import defaultdict

from placer.errors import InputError
from placer.plan import Assignment, LinkUse, Metrics, Plan, PoolOut, Route

ROW_LISTS = ("pools", "routes", "assignments")


def reject_models(plan: Plan, scenario: str) -> None:
    """InputError when a single-model scenario's plan names a model on a row."""
    for rows in ROW_LISTS:
        for i, row in enumerate(getattr(plan, rows)):
            if row.model is not None:
                raise InputError(f"{rows}[{i}].model: unknown model {row.model!r}; scenario {scenario!r} plans "
                                 "one model (no 'models' list): drop 'model' from the plan's rows")


def _owner(rows: str, i: int, model: str | None, names: tuple[str, ...]) -> str:
    if model is None:
        raise InputError(f"{rows}[{i}].model: a fleet plan names the model of every row; models: {', '.join(names)}")
    if model not in names:
        raise InputError(f"{rows}[{i}].model: unknown model {model!r}; models: {', '.join(names)}")
    return model


def split_plan(plan: Plan, names: tuple[str, ...]) -> dict[str, Plan]:
    """Each model's own plan from a fleet plan (see the module docstring); its ``links`` are the
    fleet's lines as they are (``placer.fleet_links.split_with_links`` gives each model its own use)."""
    parts: dict[str, dict[str, list]] = {name: {rows: [] for rows in ROW_LISTS} for name in names}
    for rows in ROW_LISTS:
        for i, row in enumerate(getattr(plan, rows)):
            owner = _owner(rows, i, row.model, names)
            parts[owner][rows].append(row.model_copy(update={"model": None}))
    models = plan.models or {}
    return {name: Plan(scenario=plan.scenario, objective=plan.objective, metrics=models.get(name, Metrics()),
                       handoff=plan.handoff, solver=plan.solver, **rows)
            for name, rows in parts.items()}


def _tagged(name: str, rows: list) -> list:
    return [row.model_copy(update={"model": name}) for row in rows]


def join_rows(parts: dict[str, Plan]) -> dict:
    """The fleet plan's pools, routes, assignments (tagged with their model), links (each line's
    Gbit/s summed over the models) and notes (prefixed with the model)."""
    pools: list[PoolOut] = []
    routes: list[Route] = []
    assignments: list[Assignment] = []
    used: dict[tuple[str, str], float] = defaultdict(float)
    capacity: dict[tuple[str, str], float] = {}
    notes: list[str] = []
    for name, part in parts.items():
        pools += _tagged(name, part.pools)
        routes += _tagged(name, part.routes)
        assignments += _tagged(name, part.assignments)
        notes += [f"{name}: {note}" for note in part.notes]
        for line in part.links:
            used[(line.src, line.dst)] += line.gbit_per_s_used
            capacity[(line.src, line.dst)] = line.gbit_per_s_capacity
    links = [LinkUse(src=s, dst=d, gbit_per_s_used=round(used[(s, d)], 6), gbit_per_s_capacity=capacity[(s, d)])
             for s, d in sorted(capacity)]
    return {"pools": pools, "routes": routes, "assignments": assignments, "links": links, "notes": notes}
