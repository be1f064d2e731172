"""Migrations create the schema on first start, agree with the models, and go down cleanly."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from db import migrate
from db.models import Base

TABLES = {"chips", "chip_profiles", "scenarios", "plans", "solve_jobs", "simulations", "jobs", "job_runs",
          "deployments", "request_log"}


def _tables(engine) -> set[str]:
    with engine.connect() as conn:
        return set(sa.inspect(conn).get_table_names()) - {"alembic_version"}


def test_upgrade_creates_every_table_at_head(engine):
    migrate.upgrade(engine)
    assert _tables(engine) == TABLES
    assert migrate.current_revision(engine) == migrate.head_revision()


def test_models_match_the_migrated_schema(engine):
    migrate.upgrade(engine)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []


def test_downgrade_to_base_drops_everything_and_upgrade_again_works(engine):
    migrate.upgrade(engine)
    migrate.downgrade(engine, "base")
    assert _tables(engine) == set()
    assert migrate.current_revision(engine) is None
    migrate.upgrade(engine)
    assert _tables(engine) == TABLES


def test_upgrade_twice_is_harmless_and_keeps_data(engine):
    from db import repo
    from db.session import session_factory, session_scope

    migrate.upgrade(engine)
    with session_scope(session_factory(engine)) as s:
        repo.create_chip(s, {"name": "GPU-X", "base": "H20"})
    migrate.upgrade(engine)
    with session_factory(engine)() as s:
        assert [c.name for c in repo.list_chips(s)] == ["GPU-X"]


def test_connect_creates_the_sqlite_file_and_its_directory(tmp_path):
    import db

    url = f"sqlite:///{tmp_path / 'nested' / 'dir' / 'placer.db'}"
    engine, factory = db.connect(url)
    try:
        assert (tmp_path / "nested" / "dir" / "placer.db").is_file()
        assert _tables(engine) == TABLES
    finally:
        engine.dispose()


def test_default_url_is_a_file_in_the_user_data_dir_whatever_the_environment_says(monkeypatch, tmp_path):
    from db.session import default_url

    monkeypatch.setenv("PLACER_DATABASE_URL", "postgresql://u@h/d")  # the service's Settings read it, not db
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    url = default_url()
    assert url == f"sqlite:///{tmp_path / 'placer' / 'placer.db'}"
