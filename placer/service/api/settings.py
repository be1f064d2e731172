"""Service settings: one validated object, built by the caller (``placer serve``, tests).

Nothing reads the environment at import time; :meth:`Settings.from_env` does when asked.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str | None = Field(
        None, description="SQLAlchemy URL; None: PLACER_DATABASE_URL or the SQLite file in the user's data dir.")
    token: str = Field(min_length=8, description="Bearer token every route but /healthz requires.")
    scheduler: bool = Field(True, description="Run the replanning scheduler in this service.")
    solve_workers: int = Field(2, ge=1, le=64, description="Solves (and replanning runs) at once.")
    max_queued: int = Field(256, ge=1, description="Solve jobs waiting beyond this answer 503 (retry later).")
    scheduler_sync_s: float = Field(30.0, gt=0, description="How often the scheduler re-reads the jobs table.")
    public_docs: bool = Field(False, description="Serve /openapi.json and /docs without the token.")
    migrate: bool = Field(True, description="Run the database migrations at start.")

    @field_validator("token")
    @classmethod
    def _no_space(cls, value: str) -> str:
        if value != value.strip() or " " in value:
            raise ValueError("token must not contain spaces")
        return value

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        """Settings from PLACER_DATABASE_URL, PLACER_API_TOKEN, PLACER_SCHEDULER (0/1),
        PLACER_SOLVE_WORKERS, with ``overrides`` (None values ignored) on top."""
        values: dict = {}
        if os.environ.get("PLACER_DATABASE_URL"):
            values["database_url"] = os.environ["PLACER_DATABASE_URL"]
        if os.environ.get("PLACER_API_TOKEN"):
            values["token"] = os.environ["PLACER_API_TOKEN"]
        if os.environ.get("PLACER_SCHEDULER"):
            values["scheduler"] = os.environ["PLACER_SCHEDULER"].lower() not in ("0", "false", "no", "off")
        if os.environ.get("PLACER_SOLVE_WORKERS"):
            values["solve_workers"] = int(os.environ["PLACER_SOLVE_WORKERS"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
