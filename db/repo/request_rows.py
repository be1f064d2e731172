"""Rows of the request log: bulk insert, and the window a replanning run fits.

in:  a Session; request-log row mappings, or a time window (and a deployment)
out: the number inserted; ``RequestLog`` rows, oldest first
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import RequestLog


def add_requests(session: Session, records: Sequence[dict[str, Any]]) -> int:
    """Insert request-log rows in one statement; returns how many."""
    if not records:
        return 0
    session.execute(RequestLog.__table__.insert(), list(records))
    return len(records)


def request_window(session: Session, start: datetime, end: datetime | None = None,
                   deployment_id: int | None = None) -> list[RequestLog]:
    """Request-log rows with ``start <= arrival_at < end``, oldest first."""
    query = select(RequestLog).where(RequestLog.arrival_at >= start).order_by(RequestLog.arrival_at,
                                                                              RequestLog.id)
    if end is not None:
        query = query.where(RequestLog.arrival_at < end)
    if deployment_id is not None:
        query = query.where(RequestLog.deployment_id == deployment_id)
    return list(session.scalars(query))
