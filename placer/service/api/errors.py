"""Exception → HTTP response: typed placer errors keep their status (db's unknown ids and
clashes become 404 and 409 through ``placer.service.errors``), validation errors name the
field and the reason, integrity errors are 409, nothing leaks a traceback.

A path id outside 1..2^31-1 (``/plans/99999999999999999999``) names no row: 404, like any
unknown id, not a 422 (nor the database's integer overflow)."""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from sqlalchemy.exc import DataError, IntegrityError

from db.errors import RepositoryError
from placer.errors import PlacerError
from placer.service.api.limits import too_large
from placer.service.api.schemas import MAX_ID
from placer.service.api.service import Overloaded
from placer.service.errors import typed

log = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def validation_detail(errors: list[dict]) -> list[dict]:
    """Pydantic errors as ``{loc, msg, type}`` (the input is left out: it may not be JSON)."""
    out = []
    for e in errors:
        msg = str(e.get("msg", "")).removeprefix("Value error, ")
        out.append({"loc": [_plain(x) for x in e.get("loc", ())], "msg": msg, "type": str(e.get("type", ""))})
    return out


def input_error(message: str, loc: tuple = ("body",)) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": [{"loc": list(loc), "msg": message,
                                                              "type": "value_error"}]})


def placer_error(exc: PlacerError) -> JSONResponse:
    """A typed error with its HTTP status; 422 in the shape of a validation error."""
    if exc.http_status == 422:
        return input_error(str(exc))
    if exc.http_status >= 500:
        log.error("placer error: %s", exc)
    return JSONResponse(status_code=exc.http_status, content={"detail": str(exc)})


_OUT_OF_RANGE = ("greater_than_equal", "less_than_equal", "greater_than", "less_than")


def unknown_path_id(errors: list[dict]) -> str | None:
    """The 404 message when a path id is out of the id range (whatever else is wrong: the
    resource cannot exist), else None."""
    ids = [e for e in errors if len(e.get("loc", ())) == 2 and e["loc"][0] == "path" and e.get("type") in _OUT_OF_RANGE]
    if not ids:
        return None
    return "; ".join(f"{e['loc'][1]} {str(e.get('input'))[:40]} not found (ids are 1..{MAX_ID})" for e in ids)


#: Statuses every route behind the token may answer (merged into each route's OpenAPI ``responses``).
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "No bearer token."},
    403: {"description": "Wrong bearer token."},
}
#: ... and every data route.
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    404: {"description": "No such id (or an id outside 1..2^31-1)."},
    413: {"description": "Request body over the service's limit (Settings.max_body_bytes)."},
}
CONFLICT = {409: {"description": "Conflicts with stored data (a duplicate name, a row still in use, "
                                 "a run in progress)."}}
UNDECODABLE = {400: {"description": "The body cannot be decoded (not UTF-8 JSON)."}}
OVERLOADED = {503: {"description": "Too many jobs queued; retry after Retry-After."}}
DEADLINE = {504: {"description": "The work ran past its deadline and was stopped (the message names it)."}}


def install(app: FastAPI, max_body_bytes: int | None = None) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 413 and max_body_bytes is not None:  # a chunked body counted past the limit
            return too_large(max_body_bytes)
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        missing = unknown_path_id(exc.errors())
        if missing is not None:
            return JSONResponse(status_code=404, content={"detail": missing})
        return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors())})

    @app.exception_handler(PlacerError)
    async def _placer(_: Request, exc: PlacerError) -> JSONResponse:
        return placer_error(exc)

    @app.exception_handler(RepositoryError)
    async def _repository(_: Request, exc: RepositoryError) -> JSONResponse:
        return placer_error(typed(exc))

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": f"conflicts with stored data: {exc.orig}"})

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        return input_error(f"a value does not fit the database: {exc.orig}")

    @app.exception_handler(Overloaded)
    async def _overloaded(_: Request, exc: Overloaded) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)}, headers={"Retry-After": "5"})
