"""Errors of the repository layer: plain exceptions, no HTTP or exit codes here.

The service layer (``placer.service.errors``) maps them to placer's typed errors:
``NotFoundError`` becomes HTTP 404, ``ConflictError`` 409, both exit code 2 on the CLI.
"""

from __future__ import annotations


class RepositoryError(Exception):
    """Base of the errors the repository raises on purpose."""


class NotFoundError(RepositoryError):
    """No row with that id or name."""

    def __init__(self, kind: str, key: object):
        self.kind, self.key = kind, key
        super().__init__(f"{kind} {key!r} not found")


class ConflictError(RepositoryError):
    """The change clashes with what is stored (a duplicate name, a row still in use)."""
