"""Stored plans (with filters and sorting) and the simulations run on them.

in:  a Session; a plan document (the plan JSON of docs/contracts.md, a plain mapping) with
     its inputs snapshot; a simulation's parameters and result mapping
out: ``Plan`` rows whose metrics and solver figures are indexed columns; ``Simulation`` rows
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from db.models import Plan, Simulation
from db.repo.base import get_row, page

#: The plan document's metrics stored as indexed columns of the same name.
METRIC_COLUMNS = ("bcr_requests_per_usd", "cost_usd_per_h", "goodput_rps", "ttft_p90_s", "tpot_s",
                  "wan_gbit_per_s", "rld_token_share")
PLAN_SORT = {
    "created_at": Plan.created_at, "bcr_requests_per_usd": Plan.bcr_requests_per_usd,
    "cost_usd_per_h": Plan.cost_usd_per_h, "goodput_rps": Plan.goodput_rps, "id": Plan.id,
}


def save_plan(session: Session, plan: dict[str, Any], *, inputs: dict[str, Any], scenario_id: int | None = None,
              source: str = "api") -> Plan:
    """Store a plan document with its inputs snapshot; its metrics and solver figures
    become indexed columns."""
    metrics, solver = plan["metrics"], plan["solver"]
    row = Plan(
        scenario_id=scenario_id, scenario_name=plan["scenario"], objective=plan["objective"], source=source,
        inputs=inputs, plan=plan, **{name: metrics[name] for name in METRIC_COLUMNS},
        solver_backend=solver["backend"], solver_status=solver["status"], solve_seconds=solver["seconds"],
    )
    session.add(row)
    session.flush()
    return row


def get_plan(session: Session, plan_id: int) -> Plan:
    return get_row(session, Plan, plan_id, "plan")


def list_plans(session: Session, *, scenario: str | None = None, scenario_id: int | None = None,
               objective: str | None = None, source: str | None = None, min_bcr: float | None = None,
               max_cost: float | None = None, created_after: datetime | None = None,
               created_before: datetime | None = None, sort: str = "created_at", descending: bool = True,
               limit: int = 50, offset: int = 0) -> tuple[list[Plan], int]:
    query = select(Plan)
    conditions = []
    if scenario is not None:
        conditions.append(Plan.scenario_name == scenario)
    if scenario_id is not None:
        conditions.append(Plan.scenario_id == scenario_id)
    if objective is not None:
        conditions.append(Plan.objective == objective)
    if source is not None:
        conditions.append(Plan.source == source)
    if min_bcr is not None:
        conditions.append(Plan.bcr_requests_per_usd >= min_bcr)
    if max_cost is not None:
        conditions.append(Plan.cost_usd_per_h <= max_cost)
    if created_after is not None:
        conditions.append(Plan.created_at >= created_after)
    if created_before is not None:
        conditions.append(Plan.created_at < created_before)
    if conditions:
        query = query.where(and_(*conditions))
    column = PLAN_SORT[sort]
    query = query.order_by(column.desc() if descending else column.asc(),
                           Plan.id.desc() if descending else Plan.id.asc())
    return page(session, query, limit, offset)


# --- simulations --------------------------------------------------------------------

def save_simulation(session: Session, plan_id: int, params: dict[str, Any], result: dict[str, Any]) -> Simulation:
    def num(key: str) -> float | None:
        value = result.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    row = Simulation(plan_id=plan_id, params=params, result=result, sla_attainment=num("sla_attainment"),
                     goodput_rps=num("goodput_rps"), bcr_requests_per_usd=num("bcr_requests_per_usd"),
                     ttft_p90_s=num("ttft_p90_s"))
    session.add(row)
    session.flush()
    return row


def get_simulation(session: Session, simulation_id: int) -> Simulation:
    return get_row(session, Simulation, simulation_id, "simulation")


def list_simulations(session: Session, plan_id: int | None = None, limit: int = 50,
                     offset: int = 0) -> tuple[list[Simulation], int]:
    query = select(Simulation).order_by(Simulation.id.desc())
    if plan_id is not None:
        query = query.where(Simulation.plan_id == plan_id)
    return page(session, query, limit, offset)
