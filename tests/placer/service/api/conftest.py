"""API fixtures: an app on a fresh SQLite database per test and a TestClient carrying the token."""

from __future__ import annotations

import pytest

from tests.placer.service.api.support import AUTH, make_settings


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "ignore:Using `httpx` with `starlette.testclient`")


@pytest.fixture
def settings(tmp_path):
    return make_settings(f"sqlite:///{tmp_path / 'api.db'}")


@pytest.fixture
def app(settings):
    from placer.service.api import create_app

    return create_app(settings)


@pytest.fixture
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app, headers=AUTH) as c:
        yield c
