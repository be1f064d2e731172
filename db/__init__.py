"""Persistence of the placer service: SQLAlchemy 2 models, sessions, Alembic migrations.

Entry points: :func:`connect` (engine + migrated schema + session factory),
:mod:`db.repo` (every read and write), :class:`RequestLogWriter` (batched request log).
Plain data in and out: nothing here imports the project (no ``placer``), reads the
environment, or connects at import time.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from db.errors import ConflictError, NotFoundError
from db.migrate import downgrade, upgrade
from db.request_log import RequestLogWriter, RequestRow
from db.session import default_url, make_engine, session_factory, session_scope

__all__ = [
    "ConflictError", "NotFoundError", "RequestLogWriter", "RequestRow", "connect", "default_url",
    "downgrade", "make_engine", "session_factory", "session_scope", "upgrade",
]


def connect(url: str | None = None, migrate: bool = True) -> tuple[Engine, sessionmaker[Session]]:
    """An engine for ``url`` (default: the user's SQLite file, :func:`default_url`),
    the schema migrated to the newest revision, and a session factory."""
    engine = make_engine(url)
    if migrate:
        upgrade(engine)
    return engine, session_factory(engine)
