"""``POST /compare``: the PDD plan beside the PD baselines (``placer compare``), on the worker pool."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter

from placer.baselines import within_inventory
from placer.optimize import SolveConfig
from placer.plan import Plan
from placer.report.headline import headline
from placer.service.api.deps import ServiceDep
from placer.service.api.errors import DEADLINE
from placer.service.api.routers.plans import scenario_spec
from placer.service.api.schemas import CompareRequest
from placer.service.jobs import solve, work
from placer.service.store import plan_document

router = APIRouter(tags=["plans"])


def _dump(value: Any) -> Any:
    return plan_document(value) if isinstance(value, Plan) else value


@router.post("/compare", response_model=dict[str, Any],
             responses={200: {"description": '{"pdd": <plan>, '
                                             '"baselines": {"same-dc-pd": <plan or {"error", "rules"}>, ...}, '
                                             '"scaled": {"same-dc-pd": <plan at equal load>, ...}, '
                                             '"pdd_best_within_inventory": <plan, when a baseline is partial>, '
                                             '"within_inventory": {"pdd", "pdd_best", "baselines"}, '
                                             '"headline": "within the inventory: ..."}'}, **DEADLINE})
async def compare(body: CompareRequest, service: ServiceDep):
    """Solve the scenario as PDD and as each baseline (same-dc-pd, cross-dc-pd, hetero-same-dc-pd = Splitwise,
    prfaas, agg), each plan's ``baseline.rules`` its rules in one line; a baseline that carries less than the
    offered load says the most it carries within the SLA on the inventory (``baseline.max_within_inventory_rps``)
    and comes again at equal load with scaled inventories (``baseline.beyond_inventory``: the chips bought);
    a cross-datacenter baseline in one datacenter is ``{"error": "not applicable: one datacenter",
    "not_applicable": true}``; when a baseline is shown at partial load, ``pdd_best_within_inventory``
    is PDD under the same rule (its best BCR within the inventory, free to leave load) while ``pdd``
    stays the plan at the whole load; ``within_inventory`` has what each side serves within the
    inventory and PDD's BCR change against each baseline both ways (:func:`placer.baselines.within_inventory`);
    ``headline``: what each side serves within the inventory, then the equal-load comparison and what it
    assumed (:func:`placer.report.headline.headline`, as the CLI prints it). In a child process killed at
    (2 + 6 × baselines) × the time limit + ``Settings.job_margin_s`` (504;
    :func:`placer.service.jobs.work.compare_deadline`)."""
    service.check_capacity()

    def compare_in_child() -> dict:
        with service.factory() as session:
            spec = scenario_spec(session, body.scenario_id, body.scenario)
            full, scenario = solve.prepare(session, spec)
            measured = solve.measured_for(session, scenario) if body.use_profiles else {}
        result = service.compute(work.compare, full, SolveConfig(body.objective, body.solver, body.time_limit_s),
                                 measured or None, what="comparison",
                                 deadline=work.compare_deadline(body.time_limit_s, service.settings.job_margin_s))
        out = {"pdd": _dump(result["pdd"]), "baselines": {k: _dump(v) for k, v in result["baselines"].items()},
               "scaled": {k: _dump(v) for k, v in result.get("scaled", {}).items()},
               "within_inventory": within_inventory(result), "headline": headline(result)}
        if "pdd_best_within_inventory" in result:
            out["pdd_best_within_inventory"] = _dump(result["pdd_best_within_inventory"])
        return out

    return await asyncio.wrap_future(service.submit(compare_in_child))
