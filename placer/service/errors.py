"""The service's typed errors, and db's plain exceptions mapped onto them.

in:  a :class:`db.errors.RepositoryError` (an unknown id or name, a clash with stored rows)
out: a :class:`placer.errors.PlacerError` the faces already know how to show:
     :class:`NotFoundError` (HTTP 404, exit code 2), :class:`ConflictError` (HTTP 409, exit code 2)

The service raises these itself too (a chip of the bundled catalog, a run in progress).
"""

from __future__ import annotations

from db import errors as db_errors
from placer.errors import PlacerError


class NotFoundError(PlacerError):
    """No stored item with that id or name."""

    exit_code = 2
    http_status = 404

    def __init__(self, kind: str, key: object):
        self.kind, self.key = kind, key
        super().__init__(f"{kind} {key!r} not found")


class ConflictError(PlacerError):
    """The change clashes with what is stored (a duplicate name, a row still in use)."""

    exit_code = 2
    http_status = 409


def typed(err: db_errors.RepositoryError) -> PlacerError:
    """The placer error a user sees for ``err`` (same message)."""
    if isinstance(err, db_errors.NotFoundError):
        return NotFoundError(err.kind, err.key)
    return ConflictError(str(err))


def user_error(err: BaseException) -> PlacerError | None:
    """``err`` as a typed placer error (db's mapped by :func:`typed`); None for anything else (a bug)."""
    if isinstance(err, PlacerError):
        return err
    if isinstance(err, db_errors.RepositoryError):
        return typed(err)
    return None

