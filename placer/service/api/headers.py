"""Response headers of every answer: no framing, no MIME sniffing, a content policy on the
dashboard, and redirects that never name a host.

- ``X-Frame-Options: DENY`` and ``X-Content-Type-Options: nosniff`` on every response;
- ``Content-Security-Policy`` on every HTML page but ``/docs`` (the dashboard at ``/`` and ``/ui``,
  its error pages): its own files only, no script at all, its two inline style blocks allowed, no
  framing, forms posted only to itself (``/docs`` loads Swagger UI from its CDN, behind the token);
- a redirect's ``Location`` keeps only its path and query: Starlette's trailing-slash redirect
  (``/plans/`` → ``/plans``) and ``url_for`` build absolute URLs from the client's ``Host`` header,
  so a forged ``Host`` once came back in ``Location`` (a redirect to another site).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DASHBOARD_CSP = ("default-src 'self'; script-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                 "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
REDIRECTS = (301, 302, 303, 307, 308)


def same_site(location: str) -> str:
    """``location`` without its scheme and host ('/' when nothing is left)."""
    parts = urlsplit(location)
    path = parts.path if parts.path.startswith("/") else "/" + parts.path
    return urlunsplit(("", "", path.replace("//", "/"), parts.query, parts.fragment))


class SecurityHeaders:
    """ASGI middleware adding the headers above to each HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = scope.get("path", "") == "/docs"

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("X-Content-Type-Options", "nosniff")
                if not docs and headers.get("content-type", "").startswith("text/html"):
                    headers.setdefault("Content-Security-Policy", DASHBOARD_CSP)
                if message["status"] in REDIRECTS and "location" in headers:
                    headers["location"] = same_site(headers["location"])
            await send(message)

        await self.app(scope, receive, wrapped)


def install(app) -> None:
    """Add :class:`SecurityHeaders` outermost (it sees every answer, the 413s included)."""
    app.add_middleware(SecurityHeaders)
