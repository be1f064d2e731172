"""What every repository module shares: flushing with conflict detection, paging, get-or-404.

in:  a Session, a query or a model and key
out: rows; :class:`~db.errors.NotFoundError` / :class:`~db.errors.ConflictError`
"""

from __future__ import annotations

from sqlalchemy import Select, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.errors import ConflictError, NotFoundError


def flush_unique(session: Session, what: str) -> None:
    """Flush; a unique-constraint race becomes ``ConflictError`` after rolling back."""
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        raise ConflictError(f"{what} already exists") from None


def add_unique(session: Session, row, what: str, taken: bool):
    """Add ``row`` (``what`` names it in messages); ``ConflictError`` when its unique name is
    ``taken`` already, or turns out to be by a concurrent insert."""
    if taken:
        raise ConflictError(f"{what} already exists")
    session.add(row)
    flush_unique(session, what)
    return row


def page(session: Session, query: Select, limit: int, offset: int) -> tuple[list, int]:
    """One page of ``query`` and the total count of its rows."""
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    rows = list(session.scalars(query.limit(limit).offset(offset)))
    return rows, total


def get_row(session: Session, model: type, key: int, kind: str):
    """The row of ``model`` with primary key ``key``, or ``NotFoundError(kind, key)``."""
    row = session.get(model, key)
    if row is None:
        raise NotFoundError(kind, key)
    return row
