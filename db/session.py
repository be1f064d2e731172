"""Engines and sessions. Nothing connects until a caller asks for an engine.

in:  a database URL from the caller (None: :func:`default_url`, a SQLite file in the
     user's data dir); this package reads no environment variable
out: a configured :class:`~sqlalchemy.engine.Engine` and a session factory
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from platformdirs import user_data_dir
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_S = 30


def default_url() -> str:
    """``sqlite:///<user data dir>/placer.db``: the database when the caller names none."""
    return f"sqlite:///{Path(user_data_dir('placer', appauthor=False)) / 'placer.db'}"


def normalize_url(url: str) -> str:
    """Plain ``postgresql://`` URLs use psycopg 3 (the driver placer installs)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str | None = None, **kwargs) -> Engine:
    """An engine for ``url`` (default: :func:`default_url`).

    SQLite gets foreign keys on, WAL journaling and a busy timeout so that the solve
    workers and the scheduler can write concurrently; its file's directory is created.
    """
    url = normalize_url(url or default_url())
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {}).setdefault("timeout", SQLITE_BUSY_TIMEOUT_S)
        kwargs["connect_args"].setdefault("check_same_thread", False)
        engine = create_engine(url, **kwargs)
        in_memory = database in ("", ":memory:")

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            if not in_memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
            cur.close()

        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
