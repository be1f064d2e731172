"""Alembic environment: runs on the connection db.migrate hands over (or the URL)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from db.models import Base
from db.session import make_engine

config = context.config
target_metadata = Base.metadata
#: Serialises concurrent upgrades of one PostgreSQL database (two services starting).
PG_LOCK_KEY = 0x706C61636572  # "placer"


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_LOCK_KEY})
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("placer migrations run online only (db.migrate.upgrade)")
run_migrations_online()
