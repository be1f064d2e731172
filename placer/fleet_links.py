"""Each model's own use of a fleet's shared lines (the flow physics; the executor never loads this).

in:  a fleet plan, the fleet problem
out: ``split_with_links``: ``placer.fleetplan.split_plan``'s parts, each with ``links`` = every line of
     the fleet plan carrying the Gbit/s that model's routes put on it, so a model whose routes cross
     the WAN never reads "WAN: none"; ``member_links`` for one model's routes

Apart from ``fleetplan`` because ``fleetplan`` is pure data the executor reads (tests/executor/
test_imports.py: the executor loads the base layer only), while a route's bytes on the WAN are
``placer.flows``' (:meth:`placer.flows.Route.wan_bytes`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from placer.fleetplan import split_plan
from placer.flows import Route as Flow
from placer.plan import LinkUse, Plan, Route

if TYPE_CHECKING:
    from placer.problem import FleetProblem, Problem


def split_with_links(plan: Plan, fleet: FleetProblem) -> dict[str, Plan]:
    """Each model's plan, with its own use of each shared line."""
    return {name: part.model_copy(update={"links": member_links(fleet.member(name), part.routes, plan.links)})
            for name, part in split_plan(plan, fleet.names).items()}


def member_links(problem: Problem, routes: list[Route], lines: list[LinkUse]) -> list[LinkUse]:
    """``lines`` (the fleet's) with the Gbit/s of one model's ``routes`` alone: each route that
    crosses a line, req/s × its KV bytes over the WAN."""
    classes = {c.name: c for c in problem.classes}
    used: dict[tuple[str, str], float] = defaultdict(float)
    for r in routes:
        if r.src != r.dst and r.rps > 0 and r.request_class in classes:
            flow = Flow(problem, classes[r.request_class], r.pipeline, r.src, r.dst, problem.options.drc)
            used[(r.src, r.dst)] += r.rps * flow.wan_bytes() * 8 / 1e9
    return [line.model_copy(update={"gbit_per_s_used": round(used.get((line.src, line.dst), 0.0), 6)})
            for line in lines]
