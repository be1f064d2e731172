"""Plans in and out of the database: db keeps plain data, the service keeps the types.

in:  a :class:`placer.plan.Plan` to store, or a stored ``plans`` row to read
out: the row (the plan saved as its contract JSON, docs/contracts.md), or the Plan again
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from db import repo
from db.models import Plan as PlanRow
from placer.plan import Plan, parse_plan


def plan_document(plan: Plan) -> dict[str, Any]:
    """The plan JSON of docs/contracts.md, as a mapping."""
    return plan.model_dump(mode="json", exclude_none=True)


def save_plan(session: Session, plan: Plan, *, inputs: dict[str, Any], scenario_id: int | None = None,
              source: str = "api") -> PlanRow:
    """Store ``plan`` with its inputs snapshot (``source``: api, cli, or job:<id>)."""
    return repo.save_plan(session, plan_document(plan), inputs=inputs, scenario_id=scenario_id, source=source)


def stored_plan(row: PlanRow) -> Plan:
    """The Plan of a stored row (InputError naming the plan if the stored JSON is not one)."""
    return parse_plan(row.plan, f"plan {row.id}")
