"""Scheduled replanning jobs and their runs: CRUD, the run lock, idempotent runs.

in:  a Session; a job's fields (schedule, workload source and policy as plain mappings)
out: ``Job`` / ``JobRun`` rows; ``lock_job`` → whether this run holds the job's lock
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.errors import ConflictError, NotFoundError
from db.models import Job, JobRun, RunOutcome, RunStatus
from db.repo.base import flush_unique, get_row, page
from db.repo.plans import get_plan
from db.repo.scenarios import get_scenario
from db.types import utcnow


def find_job(session: Session, name: str) -> Job | None:
    return session.scalar(select(Job).where(Job.name == name))


def get_job(session: Session, job_id: int) -> Job:
    return get_row(session, Job, job_id, "job")


def create_job(session: Session, **fields: Any) -> Job:
    name = fields["name"]
    if find_job(session, name) is not None:
        raise ConflictError(f"job {name!r} already exists")
    get_scenario(session, fields["scenario_id"])
    if fields.get("current_plan_id") is not None:
        get_plan(session, fields["current_plan_id"])
    row = Job(**fields)
    session.add(row)
    flush_unique(session, f"job {name!r}")
    return row


def update_job(session: Session, job_id: int, **fields: Any) -> Job:
    row = get_job(session, job_id)
    if "name" in fields and fields["name"] != row.name and find_job(session, fields["name"]) is not None:
        raise ConflictError(f"job {fields['name']!r} already exists")
    if fields.get("scenario_id") is not None:
        get_scenario(session, fields["scenario_id"])
    if fields.get("current_plan_id") is not None:
        get_plan(session, fields["current_plan_id"])
    for key, value in fields.items():
        setattr(row, key, value)
    flush_unique(session, f"job {row.name!r}")
    return row


def delete_job(session: Session, job_id: int) -> None:
    session.delete(get_job(session, job_id))
    session.flush()


def list_jobs(session: Session, enabled: bool | None = None, limit: int = 100,
              offset: int = 0) -> tuple[list[Job], int]:
    query = select(Job).order_by(Job.id)
    if enabled is not None:
        query = query.where(Job.enabled == enabled)
    return page(session, query, limit, offset)


def lock_job(session: Session, job_id: int, run_id: int, ttl_s: float) -> bool:
    """Take the job's run lock for ``run_id`` unless another live run holds it.

    One conditional UPDATE, so two triggers racing on SQLite or PostgreSQL cannot both
    win; a lock whose holder died expires after ``ttl_s``.
    """
    now = utcnow()
    result = session.execute(
        update(Job).where(Job.id == job_id, or_(Job.active_run_id.is_(None), Job.lock_expires_at < now))
        .values(active_run_id=run_id, lock_expires_at=now + timedelta(seconds=ttl_s))
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def unlock_job(session: Session, job_id: int, run_id: int) -> None:
    session.execute(
        update(Job).where(Job.id == job_id, Job.active_run_id == run_id)
        .values(active_run_id=None, lock_expires_at=None).execution_options(synchronize_session=False)
    )


def release_stale_locks(session: Session) -> int:
    """Release every job lock whose run is not PENDING or RUNNING (start-up recovery); the count."""
    live = select(JobRun.id).where(JobRun.status.in_([RunStatus.PENDING, RunStatus.RUNNING]))
    result = session.execute(
        update(Job).where(Job.active_run_id.is_not(None), Job.active_run_id.not_in(live))
        .values(active_run_id=None, lock_expires_at=None).execution_options(synchronize_session=False)
    )
    return result.rowcount


# --- job runs -----------------------------------------------------------------------

def find_run_by_key(session: Session, key: str) -> JobRun | None:
    return session.scalar(select(JobRun).where(JobRun.idempotency_key == key))


def create_run(session: Session, job_id: int, trigger: str, idempotency_key: str | None = None,
               ) -> tuple[JobRun, bool]:
    """A PENDING run, or the run already created under ``idempotency_key`` (and False)."""
    if idempotency_key is not None:
        existing = find_run_by_key(session, idempotency_key)
        if existing is not None:
            return existing, False
    row = JobRun(job_id=job_id, trigger=trigger, idempotency_key=idempotency_key, status=RunStatus.PENDING)
    session.add(row)
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        existing = find_run_by_key(session, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        return existing, False
    return row, True


def get_run(session: Session, run_id: int, job_id: int | None = None) -> JobRun:
    row = session.get(JobRun, run_id)
    if row is None or (job_id is not None and row.job_id != job_id):
        raise NotFoundError("run", run_id)
    return row


def list_runs(session: Session, job_id: int, outcome: RunOutcome | None = None, limit: int = 50,
              offset: int = 0) -> tuple[list[JobRun], int]:
    query = select(JobRun).where(JobRun.job_id == job_id).order_by(JobRun.id.desc())
    if outcome is not None:
        query = query.where(JobRun.outcome == outcome)
    return page(session, query, limit, offset)


def interrupted_runs(session: Session) -> list[JobRun]:
    """Runs a previous service process left PENDING or RUNNING, oldest first."""
    return list(session.scalars(select(JobRun).where(
        JobRun.status.in_([RunStatus.PENDING, RunStatus.RUNNING])).order_by(JobRun.id)))


def runs_by_outcome(session: Session) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome, n in session.execute(select(JobRun.outcome, func.count()).where(JobRun.outcome.is_not(None))
                                      .group_by(JobRun.outcome)):
        counts[RunOutcome(outcome).value] = n
    return counts
