"""Each db test runs on a fresh SQLite file and, when configured, a fresh PostgreSQL schema."""

from __future__ import annotations

import pytest

from tests.db.support import BACKENDS, database_url


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    with database_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def engine(db_url):
    from db.session import make_engine

    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def factory(db_url):
    import db

    engine, factory = db.connect(db_url)
    yield factory
    engine.dispose()
