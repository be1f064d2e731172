"""The app factory: ``create_app(settings)`` → a FastAPI app. Nothing connects before the
app starts; at start the database is migrated, the worker pool and (optionally) the
replanning scheduler are started, and the access log's credential filter is installed
(``logs``); at shutdown they are stopped. ``/docs`` takes the token or the dashboard's sign-in.
Bodies over ``settings.max_body_bytes`` → 413."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials

from placer.service.api import errors, headers, limits, logs
from placer.service.api.deps import Authorized, require_token
from placer.service.api.routers import chips, compare, health, jobs, plans, profiles, scenarios, simulate
from placer.service.api.service import Service
from placer.service.dashboard import auth as dashboard_auth
from placer.service.dashboard import mount
from placer.settings import Settings

DATA_ROUTERS = (chips.router, profiles.router, scenarios.router, plans.router, compare.router, simulate.router,
                jobs.router)


#: Routes that queue work on the bounded pool (503 when it is full).
QUEUEING = {("POST", "/plans"), ("POST", "/compare"), ("POST", "/simulate"), ("POST", "/jobs/{job_id}/runs")}


def document_refusals(router: APIRouter) -> None:
    """Every status a route can answer is in its OpenAPI: 409 on every write (the database's
    integrity errors map there), 400 where a body may not decode, 503 where work is queued
    (the rest: ``errors.COMMON_RESPONSES``).
    Idempotent: the routers are module-level, and each app built includes them again."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            continue
        for method in route.methods:
            if method in ("POST", "PUT", "PATCH", "DELETE"):
                route.responses = {**errors.CONFLICT, **route.responses}
            if method in ("POST", "PUT", "PATCH") and route.body_field is not None:
                route.responses = {**errors.UNDECODABLE, **route.responses}
            if (method, route.path) in QUEUEING:
                route.responses = {**errors.OVERLOADED, **route.responses}


def _docs_reader(request: Request) -> None:
    """``/docs`` and ``/openapi.json``: a client sending ``Authorization`` needs the token (401/403);
    a browser signed in to the dashboard reads them with its cookie; one that is not is sent to sign
    in from ``/docs`` (the address ``placer serve`` prints) and refused (401) at ``/openapi.json``."""
    header = request.headers.get("authorization")
    if header is None and dashboard_auth.signed_in(request):
        return
    if header is None and request.url.path == "/docs":
        dashboard_auth.require_viewer(request)  # 303 to /ui/login?next=/docs
    scheme, _, value = (header or "").partition(" ")
    given = HTTPAuthorizationCredentials(scheme=scheme, credentials=value.strip()) if value.strip() else None
    require_token(request.app.state.service, given)


def create_app(settings: Settings) -> FastAPI:
    if settings.token is None:
        raise ValueError("token: the API needs a bearer token (Settings.token), got None")
    service = Service(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        logs.install()  # after the server configured its loggers: no token in an access-log line
        service.start()
        try:
            yield
        finally:
            service.stop()

    app = FastAPI(
        title="placer",
        version="1",
        description="Hardware-aware placement optimizer for PDD inference: scenarios in, plans out, "
                    "scheduled replanning. Every route but /healthz needs `Authorization: Bearer <token>`.",
        lifespan=lifespan,
        openapi_url=None, docs_url=None, redoc_url=None,
    )
    app.state.service = service
    errors.install(app, max_body_bytes=settings.max_body_bytes)
    limits.install(app, settings.max_body_bytes)
    headers.install(app)  # no framing or sniffing, the dashboard's CSP, redirects that name no host
    app.include_router(health.router)
    app.include_router(health.metrics_router, responses=errors.AUTH_RESPONSES)
    for router in DATA_ROUTERS:
        document_refusals(router)
        app.include_router(router, dependencies=[Authorized], responses=errors.COMMON_RESPONSES)

    docs_deps = [] if settings.public_docs else [Depends(_docs_reader)]

    @app.get("/openapi.json", include_in_schema=False, dependencies=docs_deps)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=docs_deps)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="placer API")

    mount(app)  # the server-rendered dashboard at / and /ui/...
    return app


