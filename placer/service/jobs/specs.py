"""What a replanning job is made of: schedule, workload source, policy (pydantic).

These are the validated shapes the API bodies, the CLI and the runner share; the
database stores them as JSON (``jobs.schedule``, ``jobs.workload``, ``jobs.policy``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Literal

from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_INTERVAL_S = 366 * 24 * 3600


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IntervalSchedule(_Spec):
    kind: Literal["interval"] = "interval"
    seconds: float = Field(ge=1, le=MAX_INTERVAL_S, description="Run every this many seconds.")


class CronSchedule(_Spec):
    kind: Literal["cron"] = "cron"
    expr: str = Field(min_length=1, max_length=200,
                      description="Five-field crontab expression (minute hour day month weekday), in UTC.")

    @field_validator("expr")
    @classmethod
    def _parse(cls, value: str) -> str:
        try:
            trigger = CronTrigger.from_crontab(value, timezone="UTC")
        except (ValueError, TypeError, KeyError, IndexError) as err:
            raise ValueError(f"not a valid crontab expression {value!r}: {err}") from None
        if trigger.get_next_fire_time(None, datetime.now(timezone.utc)) is None:  # e.g. "0 0 31 2 *"
            raise ValueError(f"the crontab expression {value!r} never fires (no such date)")
        return value


class ManualSchedule(_Spec):
    """No schedule: the job runs only when triggered (``placer jobs run-now``, ``POST /jobs/{id}/runs``)."""

    kind: Literal["manual"] = "manual"


Schedule = Annotated[IntervalSchedule | CronSchedule | ManualSchedule, Field(discriminator="kind")]


class TraceSource(_Spec):
    kind: Literal["trace"] = "trace"
    path: str = Field(min_length=1, max_length=4096,
                      description="JSON Lines trace on the service's machine (docs/contracts.md trace format), "
                      "e.g. the request log `placer deploy --request-log FILE` writes.")
    window_s: float | None = Field(
        None, gt=0, le=90 * 24 * 3600,
        description="Fit only the requests of the last this many seconds (default: the whole file). A request "
        "log's timestamps are Unix times: the window ends now; a trace's start near 0: it is the file's last "
        "window_s seconds.")
    min_requests: int = Field(20, ge=1, le=10_000_000,
                              description="With window_s: fewer requests than this in the window and the run is "
                              "skipped.")


class RequestLogSource(_Spec):
    kind: Literal["request_log"] = "request_log"
    window_s: float = Field(3600.0, gt=0, le=90 * 24 * 3600,
                            description="Fit the requests served in the last this many seconds.")
    deployment_id: int | None = Field(None, ge=1, description="Only this deployment's requests (default: all).")
    min_requests: int = Field(20, ge=1, le=10_000_000,
                              description="Fewer requests than this in the window: the run is skipped.")


WorkloadSource = Annotated[TraceSource | RequestLogSource, Field(discriminator="kind")]


class Policy(_Spec):
    mode: Literal["propose", "apply"] = Field(
        "propose", description="propose: store the better plan for a user to adopt; apply: adopt it and "
        "request a deployment.")
    min_bcr_gain_pct: float = Field(
        5.0, ge=0, le=10_000, description="Adopt only when BCR beats the current plan (evaluated under the "
        "new workload) by at least this many percent.")
    max_pool_changes: int | None = Field(
        None, ge=1, le=10_000, description="Hold back a plan that adds, removes or resizes more pools than this.")
    cooldown_s: float = Field(0.0, ge=0, le=MAX_INTERVAL_S,
                              description="After an adoption, hold back further changes this long.")
    deploy_url: str | None = Field(
        None, pattern=r"^https?://", max_length=500,
        description="apply mode: the running deployment's server (`placer deploy`); an adopted plan is "
        "POSTed to its /plan and applied live (new instances join, leaving ones drain).")
    apply_timeout_s: float = Field(
        600.0, gt=0, le=24 * 3600, description="apply mode: how long applying a plan to the deployment may take "
        "(its own limit, not the solver's); past it the run is FAILED and the plan not adopted.")
