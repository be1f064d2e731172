"""Solve jobs (``POST /plans``): create, claim atomically, finish, count, recover.

in:  a Session; a scenario name and the request snapshot (a plain mapping)
out: ``SolveJob`` rows; ``claim_solve_job`` → whether this worker won the job
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from db.models import SolveJob, SolveStatus
from db.repo.base import get_row, page
from db.types import utcnow


def create_solve_job(session: Session, *, scenario_name: str, request: dict[str, Any],
                     scenario_id: int | None = None) -> SolveJob:
    row = SolveJob(scenario_id=scenario_id, scenario_name=scenario_name, request=request,
                   status=SolveStatus.PENDING)
    session.add(row)
    session.flush()
    return row


def get_solve_job(session: Session, job_id: int) -> SolveJob:
    return get_row(session, SolveJob, job_id, "solve job")


def list_solve_jobs(session: Session, status: SolveStatus | None = None, limit: int = 50,
                    offset: int = 0) -> tuple[list[SolveJob], int]:
    query = select(SolveJob).order_by(SolveJob.id.desc())
    if status is not None:
        query = query.where(SolveJob.status == status)
    return page(session, query, limit, offset)


def claim_solve_job(session: Session, job_id: int) -> bool:
    """PENDING → RUNNING, atomically; False when someone else has it (or it is done)."""
    result = session.execute(
        update(SolveJob).where(SolveJob.id == job_id, SolveJob.status == SolveStatus.PENDING)
        .values(status=SolveStatus.RUNNING, started_at=utcnow())
    )
    return result.rowcount == 1


def finish_solve_job(session: Session, job_id: int, *, plan_id: int | None = None, error: str | None = None,
                     error_status: int | None = None) -> SolveJob:
    row = get_solve_job(session, job_id)
    row.status = SolveStatus.FAILED if error is not None else SolveStatus.SUCCEEDED
    row.plan_id, row.error, row.error_status, row.finished_at = plan_id, error, error_status, utcnow()
    session.flush()
    return row


def solve_jobs_by_status(session: Session) -> dict[str, int]:
    counts = {s.value: 0 for s in SolveStatus}
    for status, n in session.execute(select(SolveJob.status, func.count()).group_by(SolveJob.status)):
        counts[SolveStatus(status).value] = n
    return counts


def interrupted_solve_jobs(session: Session) -> list[SolveJob]:
    """Jobs a previous service process left PENDING or RUNNING."""
    return list(session.scalars(select(SolveJob).where(
        SolveJob.status.in_([SolveStatus.PENDING, SolveStatus.RUNNING])).order_by(SolveJob.id)))
