"""Dashboard fixtures: the two micro plans are solved once per session (pure data); every
test gets its own SQLite database seeded from them."""

from __future__ import annotations

import pytest

from tests.placer.service.dashboard.support import AUTH, make_app, seed, solve_micro_pair


@pytest.fixture(scope="session")
def micro_plans():
    return solve_micro_pair()


@pytest.fixture
def seeded(tmp_path, micro_plans):
    return seed(f"sqlite:///{tmp_path / 'dashboard.db'}", *micro_plans)


@pytest.fixture
def app(seeded):
    return make_app(seeded.url)


@pytest.fixture
def anonymous(app):
    """A TestClient without credentials (follows no redirects)."""
    from fastapi.testclient import TestClient

    with TestClient(app, follow_redirects=False) as c:
        yield c


@pytest.fixture
def client(app):
    """A TestClient carrying the service token as a bearer header."""
    from fastapi.testclient import TestClient

    with TestClient(app, headers=AUTH) as c:
        yield c


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with `starlette.testclient`")
