"""ORM models: what the service stores (SQLAlchemy 2, typed mappings).

Tables
------
chips           custom chips (ChipSpec JSON) beside the bundled catalog
chip_profiles   measured efficiencies of a chip, with provenance
scenarios       scenario documents (docs/contracts.md mapping), unique by name
solve_jobs      one solve request (POST /plans): enum status, error, resulting plan
plans           inputs snapshot + plan JSON + indexed metric columns
simulations     a simulator run of a plan: parameters and the Simulation JSON
jobs            scheduled replanning jobs: scenario, schedule, workload source, policy
job_runs        one run of a job: status, outcome, baseline and new plan, diff
deployments     a plan handed to the executor (by a job in `apply` mode, or a user)
request_log     one row per served request, written by the executor in batches

The schema itself is created by the Alembic migrations in ``db/migrations``; these
classes must agree with them (a test compares the two).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Enum, Float, ForeignKey, Index, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from db.types import BigId, JSONDoc, UTCDateTime, utcnow

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSONDoc, datetime: UTCDateTime}


class SolveStatus(str, enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


#: Runs of replanning jobs share the solve-job statuses.
RunStatus = SolveStatus


class RunOutcome(str, enum.Enum):
    """What a finished replanning run decided."""

    INITIAL = "INITIAL"  # the job had no current plan: this one becomes it
    ADOPTED = "ADOPTED"  # policy `apply`: the gain cleared the threshold; now the current plan
    PROPOSED = "PROPOSED"  # policy `propose`: the gain cleared the threshold; waits for a user
    UNCHANGED = "UNCHANGED"  # the gain did not clear the threshold
    HELD = "HELD"  # the gain cleared it, but the cool-down or the pool-change limit holds it back
    SKIPPED = "SKIPPED"  # nothing to fit (no traffic in the window)


class DeploymentStatus(str, enum.Enum):
    REQUESTED = "REQUESTED"
    ACTIVE = "ACTIVE"
    SUPERSEDED = "SUPERSEDED"
    FAILED = "FAILED"


def _enum(cls: type[enum.Enum], name: str) -> Enum:
    return Enum(cls, name=name, native_enum=False, length=16, create_constraint=True,
                values_callable=lambda e: [m.value for m in e], validate_strings=True)


class Chip(Base):
    __tablename__ = "chips"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    spec: Mapped[dict[str, Any]] = mapped_column(doc="placer.specs.ChipSpec as JSON")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class ChipProfile(Base):
    __tablename__ = "chip_profiles"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    chip: Mapped[str] = mapped_column(String(128), index=True)
    compute_efficiency: Mapped[float | None] = mapped_column(Float)
    mem_bw_efficiency: Mapped[float | None] = mapped_column(Float)
    interconnect_efficiency: Mapped[float | None] = mapped_column(Float)
    measured_by: Mapped[str] = mapped_column(String(200), default="")
    measured_at: Mapped[datetime] = mapped_column(default=utcnow)
    software: Mapped[str] = mapped_column(String(200), default="")
    results: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Scenario(Base):
    __tablename__ = "scenarios"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    spec: Mapped[dict[str, Any]] = mapped_column(doc="the scenario mapping of docs/contracts.md")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Plan(Base):
    __tablename__ = "plans"
    __table_args__ = (Index("ix_plans_scenario_name_created_at", "scenario_name", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    scenario_id: Mapped[int | None] = mapped_column(ForeignKey("scenarios.id", ondelete="SET NULL"), index=True)
    scenario_name: Mapped[str] = mapped_column(String(200))
    objective: Mapped[str] = mapped_column(String(32), index=True)
    source: Mapped[str] = mapped_column(String(64), default="api", doc="api, cli, or job:<id>")
    inputs: Mapped[dict[str, Any]] = mapped_column(doc="scenario snapshot, solver, time limit, profiles used")
    plan: Mapped[dict[str, Any]] = mapped_column(doc="the plan JSON of docs/contracts.md")
    bcr_requests_per_usd: Mapped[float] = mapped_column(Float, index=True)
    cost_usd_per_h: Mapped[float] = mapped_column(Float, index=True)
    goodput_rps: Mapped[float] = mapped_column(Float)
    ttft_p90_s: Mapped[float] = mapped_column(Float)
    tpot_s: Mapped[float] = mapped_column(Float)
    wan_gbit_per_s: Mapped[float] = mapped_column(Float)
    rld_token_share: Mapped[float] = mapped_column(Float)
    solver_backend: Mapped[str] = mapped_column(String(64), default="")
    solver_status: Mapped[str] = mapped_column(String(32), default="")
    solve_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class SolveJob(Base):
    __tablename__ = "solve_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    scenario_id: Mapped[int | None] = mapped_column(ForeignKey("scenarios.id", ondelete="SET NULL"))
    scenario_name: Mapped[str] = mapped_column(String(200))
    request: Mapped[dict[str, Any]] = mapped_column(doc="scenario snapshot and solve parameters")
    status: Mapped[SolveStatus] = mapped_column(_enum(SolveStatus, "solve_status"), index=True,
                                                default=SolveStatus.PENDING)
    error: Mapped[str | None] = mapped_column(Text)
    error_status: Mapped[int | None] = mapped_column(Integer, doc="HTTP status of the error (422 user, 500 bug)")
    plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()


class Simulation(Base):
    __tablename__ = "simulations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"), index=True)
    params: Mapped[dict[str, Any]] = mapped_column()
    result: Mapped[dict[str, Any]] = mapped_column(doc="the Simulation JSON of docs/contracts.md")
    sla_attainment: Mapped[float | None] = mapped_column(Float)
    goodput_rps: Mapped[float | None] = mapped_column(Float)
    bcr_requests_per_usd: Mapped[float | None] = mapped_column(Float)
    ttft_p90_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Job(Base):
    """A scheduled replanning job."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    scenario_id: Mapped[int] = mapped_column(ForeignKey("scenarios.id", ondelete="RESTRICT"), index=True)
    schedule: Mapped[dict[str, Any]] = mapped_column(doc="{kind: interval, seconds} or {kind: cron, expr}")
    workload: Mapped[dict[str, Any]] = mapped_column(doc="{kind: trace, path} or {kind: request_log, window_s}")
    policy: Mapped[dict[str, Any]] = mapped_column(
        doc="{mode: propose|apply, min_bcr_gain_pct, max_pool_changes, cooldown_s}")
    objective: Mapped[str] = mapped_column(String(32), default="bcr")
    solver: Mapped[str] = mapped_column(String(32), default="ortools")
    time_limit_s: Mapped[float] = mapped_column(Float, default=30.0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    current_plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", ondelete="SET NULL"))
    last_adopted_at: Mapped[datetime | None] = mapped_column()
    active_run_id: Mapped[int | None] = mapped_column(Integer, doc="the run holding the job's lock")
    lock_expires_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    scenario: Mapped[Scenario] = relationship(lazy="joined")


class JobRun(Base):
    __tablename__ = "job_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    trigger: Mapped[str] = mapped_column(String(32), default="manual", doc="schedule or manual")
    status: Mapped[RunStatus] = mapped_column(_enum(RunStatus, "run_status"), default=RunStatus.PENDING)
    outcome: Mapped[RunOutcome | None] = mapped_column(_enum(RunOutcome, "run_outcome"))
    reason: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    baseline_plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", ondelete="SET NULL"))
    plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", ondelete="SET NULL"))
    baseline_bcr: Mapped[float | None] = mapped_column(Float, doc="current plan under the new workload")
    new_bcr: Mapped[float | None] = mapped_column(Float)
    gain_pct: Mapped[float | None] = mapped_column(Float)
    diff: Mapped[dict[str, Any] | None] = mapped_column()
    workload: Mapped[dict[str, Any] | None] = mapped_column(doc="the fitted workload the run solved for")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()


class Deployment(Base):
    __tablename__ = "deployments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    status: Mapped[DeploymentStatus] = mapped_column(_enum(DeploymentStatus, "deployment_status"),
                                                     default=DeploymentStatus.REQUESTED)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class RequestLog(Base):
    """One served request (written by the executor, read by replanning)."""

    __tablename__ = "request_log"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    arrival_at: Mapped[datetime] = mapped_column(index=True)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    prefix_hit_tokens: Mapped[int] = mapped_column(Integer)
    pipeline: Mapped[str] = mapped_column(String(16), doc="P-MD, P-RLD-MD, P-RLD or P-D")
    ttft_s: Mapped[float | None] = mapped_column(Float)
    tpot_s: Mapped[float | None] = mapped_column(Float)
    request_class: Mapped[str | None] = mapped_column(String(200))
    deployment_id: Mapped[int | None] = mapped_column(ForeignKey("deployments.id", ondelete="SET NULL"))
