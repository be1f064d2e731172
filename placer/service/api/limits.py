"""Request-size limit: a body over ``max_body_bytes`` is refused with 413 before it is parsed
or stored.

Two layers, both outside the routes: a body that declares its ``Content-Length`` over the
limit is answered at once (:class:`DeclaredLength`, never read); a body sent without a
length (chunked) is counted while it is read by Starlette's ``RequestBodyLimitMiddleware``,
whose 413 the app's error handler words (``errors.install``). Both answer
``{"detail": "request body over N bytes ..."}``.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


def too_large(max_body_bytes: int) -> JSONResponse:
    return JSONResponse(status_code=413, content={
        "detail": f"request body over {max_body_bytes} bytes (the limit: PLACER_MAX_BODY_BYTES)"})


class DeclaredLength:
    """413 for a request whose ``Content-Length`` is over the limit, without reading it."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = Headers(scope=scope).get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                await too_large(self.max_body_bytes)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def install(app, max_body_bytes: int) -> None:
    """Add both layers to a Starlette/FastAPI ``app`` (the declared-length check outermost)."""
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=max_body_bytes)
    app.add_middleware(DeclaredLength, max_body_bytes=max_body_bytes)
