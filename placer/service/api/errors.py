"""Exception → HTTP response: typed placer errors keep their status (db's unknown ids and
clashes become 404 and 409 through ``placer.service.errors``), validation errors name the
field and the reason, integrity errors are 409, nothing leaks a traceback."""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, IntegrityError

from db.errors import RepositoryError
from placer.errors import PlacerError
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


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
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
