"""``/jobs``: scheduled replanning jobs, their runs, adopting a proposal; ``/deployments``.

A run started here (``POST /jobs/{id}/runs``) goes on the same bounded worker pool as
the solves; an ``Idempotency-Key`` header makes a retried request return the first run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from db import repo
from db.models import DeploymentStatus, RunOutcome
from placer.errors import InputError
from placer.service.api.deps import ServiceDep, SessionDep
from placer.service.api.schemas import AdoptOut, DeploymentOut, Id, JobIn, JobOut, JobPatch, Page, RunOut
from placer.service.errors import ConflictError
from placer.service.jobs import runner
from placer.service.jobs.specs import TraceSource

router = APIRouter(tags=["jobs"])


def check_trace(path: str, field: str) -> None:
    """InputError unless ``path`` is a file on the service's machine."""
    try:
        ok = Path(path).is_file()
    except (OSError, ValueError):  # e.g. an embedded NUL byte
        ok = False
    if not ok:
        raise InputError(f"{field}: no trace file {path[:300]!r} on the service's machine")


def _check_source(source) -> None:
    if isinstance(source, TraceSource):
        check_trace(source.path, "workload.path")


def job_out(service, row) -> JobOut:
    out = JobOut.model_validate(row)
    if service.scheduler is not None:
        out.next_run_at = service.scheduler.scheduled().get(row.id)
    return out


@router.post("/jobs", response_model=JobOut, status_code=status.HTTP_201_CREATED)
def create_job(body: JobIn, session: SessionDep, service: ServiceDep):
    """Add a replanning job; 409 if the name is taken, 404 for an unknown scenario or plan."""
    _check_source(body.workload)
    row = repo.create_job(session, **body.model_dump(mode="json"))
    session.commit()
    service.sync_scheduler()
    return job_out(service, row)


@router.get("/jobs", response_model=Page[JobOut])
def list_jobs(session: SessionDep, service: ServiceDep, enabled: bool | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100,
              offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    rows, total = repo.list_jobs(session, enabled, limit, offset)
    return Page[JobOut](items=[job_out(service, r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/jobs/{job_id}", response_model=JobOut)
def get_job(job_id: Id, session: SessionDep, service: ServiceDep):
    return job_out(service, repo.get_job(session, job_id))


@router.patch("/jobs/{job_id}", response_model=JobOut)
def update_job(job_id: Id, body: JobPatch, session: SessionDep, service: ServiceDep):
    changes = body.model_dump(mode="json", exclude_unset=True)
    for key in ("name", "scenario_id", "schedule", "workload", "policy", "objective", "solver", "time_limit_s",
                "enabled"):
        if key in changes and changes[key] is None:
            raise InputError(f"{key}: may not be null")
    if body.workload is not None:
        _check_source(body.workload)
    row = repo.update_job(session, job_id, **changes)
    session.commit()
    service.sync_scheduler()
    return job_out(service, row)


@router.delete("/jobs/{job_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_job(job_id: Id, session: SessionDep, service: ServiceDep) -> None:
    """Remove the job and its runs (plans and deployments stay)."""
    repo.delete_job(session, job_id)
    session.commit()
    service.sync_scheduler()


@router.post("/jobs/{job_id}/runs", response_model=RunOut, status_code=status.HTTP_202_ACCEPTED,
             responses={200: {"model": RunOut, "description": "The run an earlier request with this "
                              "Idempotency-Key started."},
                        409: {"description": "Another run of this job is in progress."}})
def run_job(job_id: Id, session: SessionDep, service: ServiceDep, response: Response,
            idempotency_key: Annotated[str | None, Header(max_length=200)] = None):
    """Run the job now (re-fit, re-solve, decide); 409 while another run of it is in progress."""
    service.check_capacity()
    repo.get_job(session, job_id)
    session.close()
    key = f"api:{job_id}:{idempotency_key}" if idempotency_key else None
    t = runner.trigger(service.factory, job_id, "manual", key)
    if t.busy_run_id is not None:
        raise ConflictError(f"run {t.busy_run_id} of job {job_id} is in progress")
    if t.created:
        service.submit_run(t.run_id)
    else:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/jobs/{job_id}/runs/{t.run_id}"
    with service.factory() as fresh:
        return RunOut.model_validate(repo.get_run(fresh, t.run_id))


@router.get("/jobs/{job_id}/runs", response_model=Page[RunOut])
def list_runs(job_id: Id, session: SessionDep, outcome: RunOutcome | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 50,
              offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    repo.get_job(session, job_id)
    rows, total = repo.list_runs(session, job_id, outcome, limit, offset)
    return Page[RunOut](items=rows, total=total, limit=limit, offset=offset)


@router.get("/jobs/{job_id}/runs/{run_id}", response_model=RunOut)
def get_run(job_id: Id, run_id: Id, session: SessionDep):
    return repo.get_run(session, run_id, job_id)


@router.post("/jobs/{job_id}/runs/{run_id}/adopt", response_model=AdoptOut)
def adopt_run(job_id: Id, run_id: Id, session: SessionDep, service: ServiceDep):
    """Make a run's plan the job's current plan (accept a proposal) and request its deployment."""
    repo.get_run(session, run_id, job_id)
    session.close()
    deployment_id = runner.adopt(service.factory, job_id, run_id)
    with service.factory() as fresh:
        return AdoptOut(job_id=job_id, plan_id=repo.get_run(fresh, run_id).plan_id, deployment_id=deployment_id)


@router.get("/deployments", response_model=Page[DeploymentOut])
def list_deployments(session: SessionDep, job_id: Annotated[int | None, Query(ge=1, le=2_147_483_647)] = None,
                     status_: Annotated[DeploymentStatus | None, Query(alias="status")] = None,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                     offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    """Plans handed to the executor (by jobs in ``apply`` mode, or adopted proposals)."""
    rows, total = repo.list_deployments(session, job_id, status_, limit, offset)
    return Page[DeploymentOut](items=rows, total=total, limit=limit, offset=offset)
