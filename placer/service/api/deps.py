"""Request dependencies (``Annotated``): the service, a database session, the token check."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from db.session import session_scope

from placer.service.api.service import Service

_bearer = HTTPBearer(auto_error=False, description="The service token (placer serve --token).")


def get_service(request: Request) -> Service:
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(get_service)]


def get_session(service: ServiceDep) -> Iterator[Session]:
    """One session per request: committed when the handler returns, rolled back on error."""
    with session_scope(service.factory) as session:
        yield session


# scope="function" (FastAPI >= 0.121, pinned): the commit happens before the response is
# sent, so a client that reads right after a write sees it.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def require_token(service: ServiceDep,
                  credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    """401 without a bearer token, 403 with the wrong one."""
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer token",
                            headers={"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(credentials.credentials.encode(), service.settings.token.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "wrong bearer token")


Authorized = Depends(require_token)
