"""The service's attack surface (issue 18, item 7): no token in a log line, bodies over the
limit refused before they are stored, ids no row can have answered 404 on every route."""

from __future__ import annotations

import logging
import re
import threading
import time

import httpx
import pytest

from placer.service.api.logs import REDACTED, redact
from tests.placer.service.api.support import AUTH, TOKEN, make_settings

HUGE = "99999999999999999999"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_token_in_the_url_never_reaches_the_access_log(tmp_path):
    import socket

    import uvicorn

    from placer.service.api import create_app

    app = create_app(make_settings(f"sqlite:///{tmp_path / 'log.db'}"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="info"))  # as `placer serve`
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    lines = _Lines()
    try:
        end = time.monotonic() + 30
        while not server.started and time.monotonic() < end:
            time.sleep(0.02)
        logging.getLogger("uvicorn.access").addHandler(lines)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            login = http.get("/ui/login", params={"token": TOKEN, "next": "/ui/jobs"})
            http.get("/ui/login", params={"next": f"/ui/jobs?token={TOKEN}"})
            http.get("/plans", params={"access_token": TOKEN}, headers=AUTH)
        assert login.status_code == 400  # refused, and no cookie set from it
        deadline = time.monotonic() + 5
        while len(lines.lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        logging.getLogger("uvicorn.access").removeHandler(lines)
        server.should_exit = True
        thread.join(30)
    assert len(lines.lines) == 3, lines.lines  # the access log is on, and these are its lines
    assert all(TOKEN not in line and REDACTED in line for line in lines.lines), lines.lines


def test_redact_keeps_everything_but_credential_values():
    assert redact("/ui/login?next=/ui/jobs&token=abc-DEF_1") == f"/ui/login?next=/ui/jobs&token={REDACTED}"
    assert redact("/ui/login?next=%2Fui%3Ftoken%3Dabc") == f"/ui/login?next=%2Fui%3Ftoken%3D{REDACTED}"
    assert redact("/plans?scenario=tokens&limit=5") == "/plans?scenario=tokens&limit=5"


@pytest.fixture
def small_limit_client(tmp_path):
    from fastapi.testclient import TestClient

    from placer.service.api import create_app

    with TestClient(create_app(make_settings(f"sqlite:///{tmp_path / 'api.db'}", max_body_bytes=64 * 1024)),
                    headers=AUTH) as c:
        yield c


def _chunks(body: bytes, size: int = 16 * 1024):
    for i in range(0, len(body), size):
        yield body[i:i + size]


def test_a_body_over_the_limit_is_413_and_nothing_is_stored(small_limit_client):
    big = b'{"chip": "H100-SXM", "measured": {"pad": "' + b"x" * 200_000 + b'"}}'
    declared = small_limit_client.post("/profiles", content=big, headers={"content-type": "application/json"})
    chunked = small_limit_client.post("/profiles", content=_chunks(big), headers={"content-type": "application/json"})
    for r in (declared, chunked):
        assert r.status_code == 413 and "over 65536 bytes" in r.json()["detail"], r.text
    assert small_limit_client.get("/profiles").json()["total"] == 0
    assert small_limit_client.post("/scenarios", json={"name": "x"}).status_code == 422  # small bodies still parsed


def test_the_default_limit_refuses_a_100_mb_class_body(client):
    from placer.settings import Settings

    limit = Settings(token=TOKEN).max_body_bytes
    r = client.post("/profiles", content=b"{" + b" " * limit + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 413


def _id_routes(app) -> list[tuple[str, str]]:
    out = []
    for path, ops in app.openapi()["paths"].items():
        if "{" in path and "chip" not in path:  # chips are named, not numbered
            out.extend((method.upper(), path) for method in ops)
    return out


def test_an_id_no_row_can_have_is_404_on_every_route(app, client):
    routes = _id_routes(app)
    assert len(routes) >= 15
    for method, path in routes:
        for bad in (HUGE, "0", "-1"):
            for k in range(path.count("{")):  # each id in turn, the others a plausible 1
                concrete = re.sub(r"\{[^}]+\}", lambda m, n=iter(range(9)): bad if next(n) == k else "1", path)
                r = client.request(method, concrete, json={})
                assert r.status_code == 404, (method, concrete, r.status_code, r.text)
                assert "not found" in r.json()["detail"]


def test_the_openapi_documents_the_refusals(app):
    paths = app.openapi()["paths"]
    assert {"401", "403", "404", "413", "422"} <= set(paths["/plans/{plan_id}"]["get"]["responses"])
    assert "409" in paths["/jobs/{job_id}/runs"]["post"]["responses"]
