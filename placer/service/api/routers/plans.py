"""``/plans`` and ``/solve-jobs``: start solves, read plans (docs/contracts.md JSON), list, diff.

``POST /plans`` validates and snapshots the inputs, stores a PENDING solve job, queues
it on the bounded worker pool and answers 202 with the job (``Location: /solve-jobs/{id}``);
the job's ``plan_id`` appears when it SUCCEEDED, its ``error`` when it FAILED.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime

from db import repo
from db.models import SolveStatus
from placer.plan import Plan
from placer.service.api.deps import ServiceDep, SessionDep
from placer.service.api.schemas import Id, Objective, Page, PlanRequest, PlanSort, PlanSummary, SolveJobOut
from placer.service.jobs import solve
from placer.service.jobs.diff import plan_diff
from placer.service.store import stored_plan

router = APIRouter(tags=["plans"])


def job_out(row) -> SolveJobOut:
    return SolveJobOut(id=row.id, status=row.status.value, error=row.error, scenario_id=row.scenario_id,
                       scenario_name=row.scenario_name, objective=row.request.get("objective", ""),
                       plan_id=row.plan_id, created_at=row.created_at, started_at=row.started_at,
                       finished_at=row.finished_at)


def scenario_spec(session, scenario_id: int | None, scenario) -> dict:
    if scenario_id is not None:
        return dict(repo.get_scenario(session, scenario_id).spec)
    return scenario.model_dump(mode="json", exclude_unset=True)


@router.post("/plans", response_model=SolveJobOut, status_code=status.HTTP_202_ACCEPTED,
             responses={503: {"description": "Too many solves queued; retry later."}})
def start_plan(body: PlanRequest, session: SessionDep, service: ServiceDep, response: Response):
    """Start a solve job (the same ``placer.optimize.optimize`` as ``placer optimize``)."""
    service.check_capacity()
    spec = scenario_spec(session, body.scenario_id, body.scenario)
    job = solve.submit(session, spec, objective=body.objective, solver=body.solver,
                       time_limit_s=body.time_limit_s, marginals=body.marginals, use_profiles=body.use_profiles,
                       scenario_id=body.scenario_id)
    session.commit()
    out = job_out(job)
    service.submit_solve(job.id, force=True)
    response.headers["Location"] = f"/solve-jobs/{job.id}"
    return out


@router.get("/solve-jobs", response_model=Page[SolveJobOut])
def list_solve_jobs(session: SessionDep,
                    status_: Annotated[SolveStatus | None, Query(alias="status")] = None,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                    offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    rows, total = repo.list_solve_jobs(session, status_, limit, offset)
    return Page[SolveJobOut](items=[job_out(r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/solve-jobs/{job_id}", response_model=SolveJobOut)
def get_solve_job(job_id: Id, session: SessionDep):
    return job_out(repo.get_solve_job(session, job_id))


@router.get("/plans", response_model=Page[PlanSummary])
def list_plans(
    session: SessionDep,
    scenario: Annotated[str | None, Query(max_length=200, description="Scenario name.")] = None,
    scenario_id: Annotated[int | None, Query(ge=1, le=2_147_483_647)] = None,
    objective: Objective | None = None,
    source: Annotated[str | None, Query(max_length=64, description="api, or job:<id>.")] = None,
    min_bcr: Annotated[float | None, Query(ge=0, description="bcr_requests_per_usd at least this.")] = None,
    max_cost: Annotated[float | None, Query(ge=0, description="cost_usd_per_h at most this.")] = None,
    created_after: AwareDatetime | None = None,
    created_before: AwareDatetime | None = None,
    sort: PlanSort = "created_at",
    descending: bool = True,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0,
):
    """Stored plans, newest first by default, with their metrics."""
    rows, total = repo.list_plans(session, scenario=scenario, scenario_id=scenario_id, objective=objective,
                                  source=source, min_bcr=min_bcr, max_cost=max_cost, created_after=created_after,
                                  created_before=created_before, sort=sort, descending=descending, limit=limit,
                                  offset=offset)
    return Page[PlanSummary](items=rows, total=total, limit=limit, offset=offset)


@router.get("/plans/{plan_id}", responses={200: {"model": Plan, "description": "The plan JSON of docs/contracts.md."}})
def get_plan(plan_id: Id, session: SessionDep) -> JSONResponse:
    return JSONResponse(repo.get_plan(session, plan_id).plan)


@router.get("/plans/{plan_id}/inputs", response_model=dict[str, Any])
def get_plan_inputs(plan_id: Id, session: SessionDep):
    """What the plan was solved from: scenario snapshot, objective, solver, profiles used."""
    return repo.get_plan(session, plan_id).inputs


@router.get("/plans/{a}/diff/{b}", response_model=dict[str, Any])
def diff_plans(a: Id, b: Id, session: SessionDep):
    """From plan ``a`` to plan ``b``: pool count changes, route changes, metric deltas."""
    pa = stored_plan(repo.get_plan(session, a))
    pb = stored_plan(repo.get_plan(session, b))
    return {"from": a, "to": b, **plan_diff(pa, pb)}
