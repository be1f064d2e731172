"""Replanning fixtures: a fresh database per test with the two-dc scenario stored, and a
helper that adds a job reading a trace the test rewrites to make the workload drift."""

from __future__ import annotations

import pytest

from tests.db.support import BACKENDS, database_url, write_trace


@pytest.fixture
def factory(tmp_path):
    import db

    engine, factory = db.connect(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield factory
    engine.dispose()


@pytest.fixture(params=BACKENDS)
def any_factory(request, tmp_path):
    """The same, on SQLite and (when configured) PostgreSQL."""
    import db

    with database_url(request.param, tmp_path) as url:
        engine, factory = db.connect(url)
        yield factory
        engine.dispose()


@pytest.fixture
def trace(tmp_path):
    """A trace file at hit rate 0.99; ``write_trace(trace, hit)`` makes it drift."""
    return write_trace(tmp_path / "workload.jsonl", 0.99)
