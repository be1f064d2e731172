"""The service's settings: one validated object, and the one place that reads the environment.

in:  ``PLACER_DATABASE_URL``, ``PLACER_API_TOKEN``, ``PLACER_SCHEDULER`` (0/false/no/off
     turn it off), ``PLACER_SOLVE_WORKERS`` — read by :meth:`Settings.from_env`, with the
     caller's explicit values (command-line options) on top
out: :class:`Settings`, handed to ``create_app`` (``placer serve``) or read for the
     database URL (``placer jobs``)

Building ``Settings(...)`` directly reads nothing (tests do that); nothing reads the
environment at import time. ``database_url=None`` means the SQLite file in the user's
data dir (:func:`db.session.default_url`).
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Field → environment variable read by :meth:`Settings.from_env`.
ENVIRONMENT = {
    "database_url": "PLACER_DATABASE_URL",
    "token": "PLACER_API_TOKEN",
    "scheduler": "PLACER_SCHEDULER",
    "solve_workers": "PLACER_SOLVE_WORKERS",
}
_OFF = ("0", "false", "no", "off")


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str | None = Field(
        None, description="SQLAlchemy URL; None: the SQLite file in the user's data dir.")
    token: str | None = Field(
        None, min_length=8, description="Bearer token every route but /healthz requires (the API needs one).")
    scheduler: bool = Field(True, description="Run the replanning scheduler in this service.")
    solve_workers: int = Field(2, ge=1, le=64, description="Solves (and replanning runs) at once.")
    max_queued: int = Field(256, ge=1, description="Solve jobs waiting beyond this answer 503 (retry later).")
    scheduler_sync_s: float = Field(30.0, gt=0, description="How often the scheduler re-reads the jobs table.")
    public_docs: bool = Field(False, description="Serve /openapi.json and /docs without the token.")
    migrate: bool = Field(True, description="Run the database migrations at start.")

    @field_validator("token")
    @classmethod
    def _no_space(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or " " in value):
            raise ValueError("token must not contain spaces")
        return value

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        """Settings from the environment variables of :data:`ENVIRONMENT` (empty ones
        ignored), with ``overrides`` (None values ignored) on top."""
        values: dict = {field: os.environ[name] for field, name in ENVIRONMENT.items() if os.environ.get(name)}
        if "scheduler" in values:
            values["scheduler"] = values["scheduler"].lower() not in _OFF
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
