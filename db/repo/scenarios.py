"""Scenario documents, unique by name.

in:  a Session; a scenario mapping (the scenario of docs/contracts.md, as the user sent it)
out: ``Scenario`` rows; ``ConflictError`` for a taken name or a scenario a job still uses
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.errors import ConflictError
from db.models import Job, Scenario
from db.repo.base import add_unique, flush_unique, get_row, page


def find_scenario(session: Session, name: str) -> Scenario | None:
    return session.scalar(select(Scenario).where(Scenario.name == name))


def get_scenario(session: Session, scenario_id: int) -> Scenario:
    return get_row(session, Scenario, scenario_id, "scenario")


def create_scenario(session: Session, spec: dict[str, Any]) -> Scenario:
    name = spec["name"]
    return add_unique(session, Scenario(name=name, spec=spec), f"scenario {name!r}",
                      find_scenario(session, name) is not None)


def update_scenario(session: Session, scenario_id: int, spec: dict[str, Any]) -> Scenario:
    row = get_scenario(session, scenario_id)
    name = spec["name"]
    other = find_scenario(session, name)
    if other is not None and other.id != row.id:
        raise ConflictError(f"scenario {name!r} already exists")
    row.name, row.spec = name, spec
    flush_unique(session, f"scenario {name!r}")
    return row


def delete_scenario(session: Session, scenario_id: int) -> None:
    row = get_scenario(session, scenario_id)
    jobs = list(session.scalars(select(Job.name).where(Job.scenario_id == scenario_id)))
    if jobs:
        raise ConflictError(f"scenario {row.name!r} is used by replanning job(s) {', '.join(jobs)}; remove them first")
    session.delete(row)
    session.flush()


def list_scenarios(session: Session, name_contains: str | None = None, limit: int = 50,
                   offset: int = 0) -> tuple[list[Scenario], int]:
    query = select(Scenario).order_by(Scenario.id)
    if name_contains:
        query = query.where(Scenario.name.contains(name_contains, autoescape=True))
    return page(session, query, limit, offset)
