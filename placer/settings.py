"""The service's settings: one validated object, and the one place that reads the environment.

in:  ``PLACER_DATABASE_URL``, ``PLACER_API_TOKEN``, ``PLACER_SCHEDULER`` (0/false/no/off
     turn it off), ``PLACER_SOLVE_WORKERS``, ``PLACER_EXECUTOR_TOKEN`` (and
     ``PLACER_<FIELD>`` for every other field, e.g. ``PLACER_MAX_BODY_BYTES``),
     read by pydantic-settings when a :class:`Settings` is built, with the caller's explicit
     values (command-line options, tests) on top
out: :class:`Settings`, handed to ``create_app`` (``placer serve``) or read for the
     database URL (``placer jobs``, ``--profiles latest``, ``--request-log db``) and the
     executor's control-plane token (``placer deploy``)

Nothing reads the environment at import time. ``database_url=None`` means the SQLite
file in the user's data dir (:func:`db.session.default_url`).
"""

from __future__ import annotations

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: Field → the environment variable it is read from (the others: ``PLACER_<FIELD>``).
ENVIRONMENT = {
    "database_url": "PLACER_DATABASE_URL",
    "token": "PLACER_API_TOKEN",
    "scheduler": "PLACER_SCHEDULER",
    "solve_workers": "PLACER_SOLVE_WORKERS",
    "executor_token": "PLACER_EXECUTOR_TOKEN",
}
_OFF = ("0", "false", "no", "off")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix="PLACER_", env_ignore_empty=True,
                                      populate_by_name=True,
                                      hide_input_in_errors=True)  # an error never echoes a token

    database_url: str | None = Field(
        None, description="SQLAlchemy URL; None: the SQLite file in the user's data dir.")
    token: str | None = Field(
        None, min_length=8, validation_alias=AliasChoices("token", ENVIRONMENT["token"]), description="Bearer token every route but /healthz requires (the API needs one).")
    scheduler: bool = Field(True, description="Run the replanning scheduler in this service.")
    solve_workers: int = Field(2, ge=1, le=64, description="Solves (and replanning runs) at once.")
    max_queued: int = Field(256, ge=1, description="Solve jobs waiting beyond this answer 503 (retry later).")
    scheduler_sync_s: float = Field(30.0, gt=0, description="How often the scheduler re-reads the jobs table.")
    public_docs: bool = Field(False, description="Serve /openapi.json and /docs without the token.")
    migrate: bool = Field(True, description="Run the database migrations at start.")
    max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Request bodies larger than this (bytes) are refused with 413.")
    job_margin_s: float = Field(
        15.0, ge=0, le=3600, description="A solve job is killed this long after its time limit (a replanning "
        "run: after twice it; /compare: after its solves' limits) and FAILS naming its deadline.")
    simulate_deadline_s: float = Field(
        120.0, gt=0, le=3600, description="POST /simulate is killed after this long (504 naming the deadline).")
    executor_token: str | None = Field(
        None, min_length=8, validation_alias=AliasChoices("executor_token", ENVIRONMENT["executor_token"]),
        description="Bearer token of the executor's control plane (placer deploy: POST /plan, /instances); "
                    "None: those calls are refused.")
    executor_protect_completions: bool = Field(
        False, description="placer deploy: /v1/completions needs the executor token too.")

    @field_validator("token", "executor_token")
    @classmethod
    def _no_space(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or " " in value):
            raise ValueError("token must not contain spaces")
        return value

    @field_validator("scheduler", mode="before")
    @classmethod
    def _lenient_switch(cls, value):
        """From the environment, anything but 0/false/no/off turns the scheduler on."""
        return value.strip().lower() not in _OFF if isinstance(value, str) else value

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        """Settings from the environment (empty variables ignored) with ``overrides`` on top;
        an override of None is no value (an option the user did not give)."""
        return cls(**{k: v for k, v in overrides.items() if v is not None})
