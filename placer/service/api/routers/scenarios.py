"""``/scenarios``: create, read, list, replace, delete scenario documents (docs/contracts.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from db import repo
from placer.errors import InputError
from placer.service.api.deps import SessionDep
from placer.service.api.schemas import Id, Page, ScenarioOut
from placer.service.jobs.solve import prepare
from placer.specs import Scenario

router = APIRouter(prefix="/scenarios", tags=["scenarios"])


def _document(session, scenario: Scenario) -> dict:
    """The stored document: what the user sent, checked (names resolve) but not expanded."""
    if len(scenario.name) > 200 or not scenario.name.strip():
        raise InputError(f"name: must be 1 to 200 characters, got {scenario.name[:50]!r}")
    spec = scenario.model_dump(mode="json", exclude_unset=True)
    prepare(session, spec)
    return spec


@router.post("", response_model=ScenarioOut, status_code=status.HTTP_201_CREATED)
def create_scenario(scenario: Scenario, session: SessionDep):
    """Store a scenario; 409 if its name is taken, 422 naming the field if it is invalid."""
    return repo.create_scenario(session, _document(session, scenario))


@router.get("", response_model=Page[ScenarioOut])
def list_scenarios(session: SessionDep, name_contains: Annotated[str | None, Query(max_length=200)] = None,
                   limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                   offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    rows, total = repo.list_scenarios(session, name_contains, limit, offset)
    return Page[ScenarioOut](items=rows, total=total, limit=limit, offset=offset)


@router.get("/{scenario_id}", response_model=ScenarioOut)
def get_scenario(scenario_id: Id, session: SessionDep):
    return repo.get_scenario(session, scenario_id)


@router.put("/{scenario_id}", response_model=ScenarioOut)
def replace_scenario(scenario_id: Id, scenario: Scenario, session: SessionDep):
    return repo.update_scenario(session, scenario_id, _document(session, scenario))


@router.delete("/{scenario_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_scenario(scenario_id: Id, session: SessionDep) -> None:
    """Plans made from it keep their snapshot; 409 while a replanning job uses it."""
    repo.delete_scenario(session, scenario_id)
