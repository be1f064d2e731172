"""Bearer-token auth: every route but /healthz answers 401 without a token, 403 with a wrong one."""

from __future__ import annotations

import re

import pytest

from tests.placer.service.api.support import AUTH, TOKEN, make_settings


def _routes(app) -> list[tuple[str, str]]:
    out = []
    for path, ops in app.openapi()["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "1", path)
        out.extend((method.upper(), concrete) for method in ops)
    return out + [("GET", "/openapi.json")]


@pytest.fixture
def bare(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


def test_health_needs_no_token(bare):
    response = bare.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok", "database": "ok", "scheduler": "off"}


def test_every_other_route_needs_the_token(app, bare):
    routes = [r for r in _routes(app) if r[1] != "/healthz"]
    assert len(routes) > 30
    for method, path in routes:
        missing = bare.request(method, path, json={})
        assert missing.status_code == 401, (method, path, missing.text)
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = bare.request(method, path, json={}, headers={"Authorization": "Bearer not-the-token"})
        assert wrong.status_code == 403, (method, path, wrong.text)


def test_the_api_docs_take_the_token_or_the_dashboards_sign_in(bare):
    """``placer serve`` prints /docs: a browser is sent to sign in, then reads the docs and their schema."""
    for method, path in (("GET", "/docs"), ("GET", "/openapi.json")):
        assert bare.request(method, path, headers={"Authorization": "Bearer not-the-token"}).status_code == 403
        assert bare.request(method, path, headers=AUTH).status_code == 200
    assert bare.get("/openapi.json").status_code == 401
    sent = bare.get("/docs", follow_redirects=False)
    assert sent.status_code == 303 and sent.headers["location"] == "/ui/login?next=%2Fdocs"
    signed = bare.post("/ui/login", data={"token": TOKEN, "next": "/docs"}, follow_redirects=False)
    assert signed.headers["location"] == "/docs"
    assert "swagger" in bare.get("/docs").text.lower() and bare.get("/openapi.json").status_code == 200


def test_a_non_bearer_scheme_is_not_accepted(bare):
    assert bare.get("/plans", headers={"Authorization": f"Basic {AUTH['Authorization'].split()[1]}"}).status_code == 401


def test_the_right_token_opens_the_data_routes_and_the_schema(bare):
    assert bare.get("/plans", headers=AUTH).status_code == 200
    assert bare.get("/openapi.json", headers=AUTH).json()["info"]["title"] == "placer"


def test_public_docs_serve_the_schema_without_a_token(tmp_path):
    from fastapi.testclient import TestClient

    from placer.service.api import create_app

    app = create_app(make_settings(f"sqlite:///{tmp_path / 'docs.db'}", public_docs=True))
    with TestClient(app) as c:
        assert c.get("/openapi.json").status_code == 200
        assert c.get("/docs").status_code == 200
        assert c.get("/plans").status_code == 401
