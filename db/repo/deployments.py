"""Deployments: plans handed to the executor (by a job in ``apply`` mode, or a user).

in:  a Session; a plan id and optionally the job that asked
out: ``Deployment`` rows; a job's earlier live deployments become SUPERSEDED
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db.models import Deployment, DeploymentStatus
from db.repo.base import page
from db.types import utcnow


def create_deployment(session: Session, plan_id: int, job_id: int | None = None, note: str = "",
                      status: DeploymentStatus = DeploymentStatus.REQUESTED) -> Deployment:
    """Ask for ``plan_id`` to be deployed (``status`` ACTIVE: it already runs); earlier live
    deployments of the job are superseded."""
    if job_id is not None:
        session.execute(
            update(Deployment).where(Deployment.job_id == job_id, Deployment.status.in_(
                [DeploymentStatus.REQUESTED, DeploymentStatus.ACTIVE]))
            .values(status=DeploymentStatus.SUPERSEDED, updated_at=utcnow())
            .execution_options(synchronize_session=False)
        )
    row = Deployment(plan_id=plan_id, job_id=job_id, note=note, status=status)
    session.add(row)
    session.flush()
    return row


def list_deployments(session: Session, job_id: int | None = None, status: DeploymentStatus | None = None,
                     limit: int = 50, offset: int = 0) -> tuple[list[Deployment], int]:
    query = select(Deployment).order_by(Deployment.id.desc())
    if job_id is not None:
        query = query.where(Deployment.job_id == job_id)
    if status is not None:
        query = query.where(Deployment.status == status)
    return page(session, query, limit, offset)
