"""Errors of the repository layer; the API maps them to 404 and 409."""

from __future__ import annotations

from placer.errors import PlacerError


class NotFoundError(PlacerError):
    """No row with that id or name."""

    exit_code = 2
    http_status = 404

    def __init__(self, kind: str, key: object):
        self.kind, self.key = kind, key
        super().__init__(f"{kind} {key!r} not found")


class ConflictError(PlacerError):
    """The change clashes with what is stored (a duplicate name, a row still in use)."""

    exit_code = 2
    http_status = 409
