"""Who may see the dashboard: the service token, carried by a browser as a cookie.

The REST API takes ``Authorization: Bearer <token>``; a browser cannot send that header
on a plain link, so:

* ``GET /ui/login`` shows a form; posting the token (``POST /ui/login``, form fields
  ``token`` and ``next``) checks it and sets the cookie ``placer_ui``, then redirects to
  ``next`` (a local path only). A token in the URL (``/ui/login?token=...``) is refused
  with 400 and never used: URLs land in access logs (where ``placer.service.api.logs``
  redacts it), browser history and Referer headers.
* The cookie holds ``HMAC-SHA256(token, "placer-dashboard-v1")``, not the token: a
  leaked cookie opens the read-only pages but not the API. It is ``HttpOnly``,
  ``SameSite=Lax``, ``Secure`` over HTTPS, and lives 12 hours. Changing the service
  token logs every browser out.
* Every dashboard page also accepts the bearer header, so scripts and tests can use
  the same token as the API.
* ``mount(app, public=True)`` serves the pages without any token (a read-only dashboard
  on a trusted network); the API itself is unchanged either way.

Every page under the dashboard is a GET that reads; nothing there changes state, so a
forged cross-site request can at most log a browser in with the attacker's own token.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated
from urllib.parse import parse_qs, quote

from fastapi import Depends, HTTPException, Request, status

COOKIE = "placer_ui"
HOME = "/ui/"  # the dashboard's first page (its plans), the address ``placer serve`` prints
COOKIE_MAX_AGE_S = 12 * 3600
_CONTEXT = b"placer-dashboard-v1"


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), _CONTEXT, hashlib.sha256).hexdigest()


def _service_token(request: Request) -> str:
    return request.app.state.service.settings.token


def token_ok(request: Request, token: str | None) -> bool:
    return bool(token) and hmac.compare_digest(token.encode(), _service_token(request).encode())


def signed_in(request: Request) -> bool:
    if getattr(request.app.state, "dashboard_public", False):
        return True
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "bearer" and token_ok(request, credentials.strip()):
        return True
    cookie = request.cookies.get(COOKIE)
    return bool(cookie) and hmac.compare_digest(cookie.encode(), cookie_value(_service_token(request)).encode())


def safe_next(target: str | None) -> str:
    """A local path to go to after login; anything else (another host, a scheme) becomes :data:`HOME`."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return HOME
    return target


def require_viewer(request: Request) -> None:
    """Dashboard pages: a browser without the cookie is sent to the login page (303)."""
    if signed_in(request):
        return
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    raise HTTPException(status.HTTP_303_SEE_OTHER, "sign in at /ui/login",
                        headers={"Location": f"/ui/login?next={quote(target, safe='')}"})


Viewer = Annotated[None, Depends(require_viewer)]


async def form_fields(request: Request) -> dict[str, str]:
    """An urlencoded form body as a dict (no python-multipart needed for two fields)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def set_cookie(response, request: Request) -> None:
    response.set_cookie(COOKIE, cookie_value(_service_token(request)), max_age=COOKIE_MAX_AGE_S, httponly=True,
                        samesite="lax", secure=request.url.scheme == "https", path="/")
