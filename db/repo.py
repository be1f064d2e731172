"""The repository: every read and write the API, the jobs and the CLI make.

in:  a Session and plain values (pydantic models from placer for plans and scenarios)
out: ORM rows; :class:`~db.errors.NotFoundError` and :class:`~db.errors.ConflictError`

Functions flush but never commit: the caller owns the transaction (``session_scope``).
A unique-constraint race is turned into ``ConflictError`` after rolling back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.errors import ConflictError, NotFoundError
from db.models import (
    Chip,
    ChipProfile,
    Deployment,
    DeploymentStatus,
    Job,
    JobRun,
    Plan,
    RequestLog,
    RunOutcome,
    RunStatus,
    Scenario,
    Simulation,
    SolveJob,
    SolveStatus,
)
from db.types import utcnow
from placer.plan import Plan as PlanDoc


def _flush_unique(session: Session, what: str) -> None:
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        raise ConflictError(f"{what} already exists") from None


def _page(session: Session, query: Select, limit: int, offset: int) -> tuple[list, int]:
    total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    rows = list(session.scalars(query.limit(limit).offset(offset)))
    return rows, total


def _get(session: Session, model: type, key: int, kind: str):
    row = session.get(model, key)
    if row is None:
        raise NotFoundError(kind, key)
    return row


# --- chips --------------------------------------------------------------------------

def list_chips(session: Session) -> list[Chip]:
    return list(session.scalars(select(Chip).order_by(Chip.name)))


def find_chip(session: Session, name: str) -> Chip | None:
    return session.scalar(select(Chip).where(Chip.name == name))


def get_chip(session: Session, name: str) -> Chip:
    row = find_chip(session, name)
    if row is None:
        raise NotFoundError("chip", name)
    return row


def create_chip(session: Session, spec: dict[str, Any]) -> Chip:
    name = spec["name"]
    if find_chip(session, name) is not None:
        raise ConflictError(f"chip {name!r} already exists")
    row = Chip(name=name, spec=spec)
    session.add(row)
    _flush_unique(session, f"chip {name!r}")
    return row


def update_chip(session: Session, name: str, spec: dict[str, Any]) -> Chip:
    row = get_chip(session, name)
    row.spec = {**spec, "name": name}
    session.flush()
    return row


def delete_chip(session: Session, name: str) -> None:
    session.delete(get_chip(session, name))
    session.flush()


# --- chip profiles ------------------------------------------------------------------

EFFICIENCY_FIELDS = ("compute_efficiency", "mem_bw_efficiency", "interconnect_efficiency")


def add_profile(session: Session, **fields: Any) -> ChipProfile:
    row = ChipProfile(**fields)
    session.add(row)
    session.flush()
    return row


def get_profile(session: Session, profile_id: int) -> ChipProfile:
    return _get(session, ChipProfile, profile_id, "profile")


def list_profiles(session: Session, chip: str | None = None, limit: int = 50,
                  offset: int = 0) -> tuple[list[ChipProfile], int]:
    query = select(ChipProfile).order_by(ChipProfile.measured_at.desc(), ChipProfile.id.desc())
    if chip is not None:
        query = query.where(ChipProfile.chip == chip)
    return _page(session, query, limit, offset)


def delete_profile(session: Session, profile_id: int) -> None:
    session.delete(get_profile(session, profile_id))
    session.flush()


def latest_profiles(session: Session, chips: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The newest profile of each chip, as the ``measured`` mapping placer.optimize takes."""
    out: dict[str, dict[str, Any]] = {}
    for chip in sorted(set(chips)):
        row = session.scalar(select(ChipProfile).where(ChipProfile.chip == chip)
                             .order_by(ChipProfile.measured_at.desc(), ChipProfile.id.desc()).limit(1))
        if row is None:
            continue
        figures = {f: getattr(row, f) for f in EFFICIENCY_FIELDS if getattr(row, f) is not None}
        if figures:
            figures["profile"] = f"profile {row.id} ({row.measured_at.date().isoformat()})"
            out[chip] = figures
    return out


# --- scenarios ----------------------------------------------------------------------

def find_scenario(session: Session, name: str) -> Scenario | None:
    return session.scalar(select(Scenario).where(Scenario.name == name))


def get_scenario(session: Session, scenario_id: int) -> Scenario:
    return _get(session, Scenario, scenario_id, "scenario")


def create_scenario(session: Session, spec: dict[str, Any]) -> Scenario:
    name = spec["name"]
    if find_scenario(session, name) is not None:
        raise ConflictError(f"scenario {name!r} already exists")
    row = Scenario(name=name, spec=spec)
    session.add(row)
    _flush_unique(session, f"scenario {name!r}")
    return row


def update_scenario(session: Session, scenario_id: int, spec: dict[str, Any]) -> Scenario:
    row = get_scenario(session, scenario_id)
    name = spec["name"]
    other = find_scenario(session, name)
    if other is not None and other.id != row.id:
        raise ConflictError(f"scenario {name!r} already exists")
    row.name, row.spec = name, spec
    _flush_unique(session, f"scenario {name!r}")
    return row


def delete_scenario(session: Session, scenario_id: int) -> None:
    row = get_scenario(session, scenario_id)
    jobs = list(session.scalars(select(Job.name).where(Job.scenario_id == scenario_id)))
    if jobs:
        raise ConflictError(f"scenario {row.name!r} is used by replanning job(s) {', '.join(jobs)}; remove them first")
    session.delete(row)
    session.flush()


def list_scenarios(session: Session, name_contains: str | None = None, limit: int = 50,
                   offset: int = 0) -> tuple[list[Scenario], int]:
    query = select(Scenario).order_by(Scenario.id)
    if name_contains:
        query = query.where(Scenario.name.contains(name_contains, autoescape=True))
    return _page(session, query, limit, offset)


# --- plans --------------------------------------------------------------------------

def save_plan(session: Session, plan: PlanDoc, *, inputs: dict[str, Any], scenario_id: int | None = None,
              source: str = "api") -> Plan:
    """Store a plan with its inputs snapshot and its metrics as indexed columns."""
    m = plan.metrics
    row = Plan(
        scenario_id=scenario_id, scenario_name=plan.scenario, objective=plan.objective, source=source,
        inputs=inputs, plan=plan.model_dump(mode="json", exclude_none=True),
        bcr_requests_per_usd=m.bcr_requests_per_usd, cost_usd_per_h=m.cost_usd_per_h, goodput_rps=m.goodput_rps,
        ttft_p90_s=m.ttft_p90_s, tpot_s=m.tpot_s, wan_gbit_per_s=m.wan_gbit_per_s,
        rld_token_share=m.rld_token_share, solver_backend=plan.solver.backend, solver_status=plan.solver.status,
        solve_seconds=plan.solver.seconds,
    )
    session.add(row)
    session.flush()
    return row


def get_plan(session: Session, plan_id: int) -> Plan:
    return _get(session, Plan, plan_id, "plan")


PLAN_SORT = {
    "created_at": Plan.created_at, "bcr_requests_per_usd": Plan.bcr_requests_per_usd,
    "cost_usd_per_h": Plan.cost_usd_per_h, "goodput_rps": Plan.goodput_rps, "id": Plan.id,
}


def list_plans(session: Session, *, scenario: str | None = None, scenario_id: int | None = None,
               objective: str | None = None, source: str | None = None, min_bcr: float | None = None,
               max_cost: float | None = None, created_after: datetime | None = None,
               created_before: datetime | None = None, sort: str = "created_at", descending: bool = True,
               limit: int = 50, offset: int = 0) -> tuple[list[Plan], int]:
    query = select(Plan)
    conditions = []
    if scenario is not None:
        conditions.append(Plan.scenario_name == scenario)
    if scenario_id is not None:
        conditions.append(Plan.scenario_id == scenario_id)
    if objective is not None:
        conditions.append(Plan.objective == objective)
    if source is not None:
        conditions.append(Plan.source == source)
    if min_bcr is not None:
        conditions.append(Plan.bcr_requests_per_usd >= min_bcr)
    if max_cost is not None:
        conditions.append(Plan.cost_usd_per_h <= max_cost)
    if created_after is not None:
        conditions.append(Plan.created_at >= created_after)
    if created_before is not None:
        conditions.append(Plan.created_at < created_before)
    if conditions:
        query = query.where(and_(*conditions))
    column = PLAN_SORT[sort]
    query = query.order_by(column.desc() if descending else column.asc(),
                           Plan.id.desc() if descending else Plan.id.asc())
    return _page(session, query, limit, offset)


# --- solve jobs ---------------------------------------------------------------------

def create_solve_job(session: Session, *, scenario_name: str, request: dict[str, Any],
                     scenario_id: int | None = None) -> SolveJob:
    row = SolveJob(scenario_id=scenario_id, scenario_name=scenario_name, request=request,
                   status=SolveStatus.PENDING)
    session.add(row)
    session.flush()
    return row


def get_solve_job(session: Session, job_id: int) -> SolveJob:
    return _get(session, SolveJob, job_id, "solve job")


def list_solve_jobs(session: Session, status: SolveStatus | None = None, limit: int = 50,
                    offset: int = 0) -> tuple[list[SolveJob], int]:
    query = select(SolveJob).order_by(SolveJob.id.desc())
    if status is not None:
        query = query.where(SolveJob.status == status)
    return _page(session, query, limit, offset)


def claim_solve_job(session: Session, job_id: int) -> bool:
    """PENDING → RUNNING, atomically; False when someone else has it (or it is done)."""
    result = session.execute(
        update(SolveJob).where(SolveJob.id == job_id, SolveJob.status == SolveStatus.PENDING)
        .values(status=SolveStatus.RUNNING, started_at=utcnow())
    )
    return result.rowcount == 1


def finish_solve_job(session: Session, job_id: int, *, plan_id: int | None = None, error: str | None = None,
                     error_status: int | None = None) -> SolveJob:
    row = get_solve_job(session, job_id)
    row.status = SolveStatus.FAILED if error is not None else SolveStatus.SUCCEEDED
    row.plan_id, row.error, row.error_status, row.finished_at = plan_id, error, error_status, utcnow()
    session.flush()
    return row


def solve_jobs_by_status(session: Session) -> dict[str, int]:
    counts = {s.value: 0 for s in SolveStatus}
    for status, n in session.execute(select(SolveJob.status, func.count()).group_by(SolveJob.status)):
        counts[SolveStatus(status).value] = n
    return counts


def interrupted_solve_jobs(session: Session) -> list[SolveJob]:
    """Jobs a previous service process left PENDING or RUNNING."""
    return list(session.scalars(select(SolveJob).where(
        SolveJob.status.in_([SolveStatus.PENDING, SolveStatus.RUNNING])).order_by(SolveJob.id)))


# --- simulations --------------------------------------------------------------------

def save_simulation(session: Session, plan_id: int, params: dict[str, Any], result: dict[str, Any]) -> Simulation:
    def num(key: str) -> float | None:
        value = result.get(key)
        return float(value) if isinstance(value, (int, float)) else None

    row = Simulation(plan_id=plan_id, params=params, result=result, sla_attainment=num("sla_attainment"),
                     goodput_rps=num("goodput_rps"), bcr_requests_per_usd=num("bcr_requests_per_usd"),
                     ttft_p90_s=num("ttft_p90_s"))
    session.add(row)
    session.flush()
    return row


def get_simulation(session: Session, simulation_id: int) -> Simulation:
    return _get(session, Simulation, simulation_id, "simulation")


def list_simulations(session: Session, plan_id: int | None = None, limit: int = 50,
                     offset: int = 0) -> tuple[list[Simulation], int]:
    query = select(Simulation).order_by(Simulation.id.desc())
    if plan_id is not None:
        query = query.where(Simulation.plan_id == plan_id)
    return _page(session, query, limit, offset)


# --- replanning jobs ----------------------------------------------------------------

def find_job(session: Session, name: str) -> Job | None:
    return session.scalar(select(Job).where(Job.name == name))


def get_job(session: Session, job_id: int) -> Job:
    return _get(session, Job, job_id, "job")


def create_job(session: Session, **fields: Any) -> Job:
    name = fields["name"]
    if find_job(session, name) is not None:
        raise ConflictError(f"job {name!r} already exists")
    get_scenario(session, fields["scenario_id"])
    if fields.get("current_plan_id") is not None:
        get_plan(session, fields["current_plan_id"])
    row = Job(**fields)
    session.add(row)
    _flush_unique(session, f"job {name!r}")
    return row


def update_job(session: Session, job_id: int, **fields: Any) -> Job:
    row = get_job(session, job_id)
    if "name" in fields and fields["name"] != row.name and find_job(session, fields["name"]) is not None:
        raise ConflictError(f"job {fields['name']!r} already exists")
    if fields.get("scenario_id") is not None:
        get_scenario(session, fields["scenario_id"])
    if fields.get("current_plan_id") is not None:
        get_plan(session, fields["current_plan_id"])
    for key, value in fields.items():
        setattr(row, key, value)
    _flush_unique(session, f"job {row.name!r}")
    return row


def delete_job(session: Session, job_id: int) -> None:
    session.delete(get_job(session, job_id))
    session.flush()


def list_jobs(session: Session, enabled: bool | None = None, limit: int = 100,
              offset: int = 0) -> tuple[list[Job], int]:
    query = select(Job).order_by(Job.id)
    if enabled is not None:
        query = query.where(Job.enabled == enabled)
    return _page(session, query, limit, offset)


def lock_job(session: Session, job_id: int, run_id: int, ttl_s: float) -> bool:
    """Take the job's run lock for ``run_id`` unless another live run holds it.

    One conditional UPDATE, so two triggers racing on SQLite or PostgreSQL cannot both
    win; a lock whose holder died expires after ``ttl_s``.
    """
    now = utcnow()
    result = session.execute(
        update(Job).where(Job.id == job_id, or_(Job.active_run_id.is_(None), Job.lock_expires_at < now))
        .values(active_run_id=run_id, lock_expires_at=now + timedelta(seconds=ttl_s))
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def unlock_job(session: Session, job_id: int, run_id: int) -> None:
    session.execute(
        update(Job).where(Job.id == job_id, Job.active_run_id == run_id)
        .values(active_run_id=None, lock_expires_at=None).execution_options(synchronize_session=False)
    )


# --- job runs -----------------------------------------------------------------------

def find_run_by_key(session: Session, key: str) -> JobRun | None:
    return session.scalar(select(JobRun).where(JobRun.idempotency_key == key))


def create_run(session: Session, job_id: int, trigger: str, idempotency_key: str | None = None,
               ) -> tuple[JobRun, bool]:
    """A PENDING run, or the run already created under ``idempotency_key`` (and False)."""
    if idempotency_key is not None:
        existing = find_run_by_key(session, idempotency_key)
        if existing is not None:
            return existing, False
    row = JobRun(job_id=job_id, trigger=trigger, idempotency_key=idempotency_key, status=RunStatus.PENDING)
    session.add(row)
    try:
        session.flush()
    except IntegrityError:
        session.rollback()
        existing = find_run_by_key(session, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        return existing, False
    return row, True


def get_run(session: Session, run_id: int, job_id: int | None = None) -> JobRun:
    row = session.get(JobRun, run_id)
    if row is None or (job_id is not None and row.job_id != job_id):
        raise NotFoundError("run", run_id)
    return row


def list_runs(session: Session, job_id: int, outcome: RunOutcome | None = None, limit: int = 50,
              offset: int = 0) -> tuple[list[JobRun], int]:
    query = select(JobRun).where(JobRun.job_id == job_id).order_by(JobRun.id.desc())
    if outcome is not None:
        query = query.where(JobRun.outcome == outcome)
    return _page(session, query, limit, offset)


def delete_run(session: Session, run_id: int) -> None:
    session.execute(delete(JobRun).where(JobRun.id == run_id))


def runs_by_outcome(session: Session) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome, n in session.execute(select(JobRun.outcome, func.count()).where(JobRun.outcome.is_not(None))
                                      .group_by(JobRun.outcome)):
        counts[RunOutcome(outcome).value] = n
    return counts


# --- deployments --------------------------------------------------------------------

def create_deployment(session: Session, plan_id: int, job_id: int | None = None, note: str = "") -> Deployment:
    """Ask for ``plan_id`` to be deployed; earlier live deployments of the job are superseded."""
    if job_id is not None:
        session.execute(
            update(Deployment).where(Deployment.job_id == job_id, Deployment.status.in_(
                [DeploymentStatus.REQUESTED, DeploymentStatus.ACTIVE]))
            .values(status=DeploymentStatus.SUPERSEDED, updated_at=utcnow())
            .execution_options(synchronize_session=False)
        )
    row = Deployment(plan_id=plan_id, job_id=job_id, note=note, status=DeploymentStatus.REQUESTED)
    session.add(row)
    session.flush()
    return row


def list_deployments(session: Session, job_id: int | None = None, status: DeploymentStatus | None = None,
                     limit: int = 50, offset: int = 0) -> tuple[list[Deployment], int]:
    query = select(Deployment).order_by(Deployment.id.desc())
    if job_id is not None:
        query = query.where(Deployment.job_id == job_id)
    if status is not None:
        query = query.where(Deployment.status == status)
    return _page(session, query, limit, offset)


# --- request log --------------------------------------------------------------------

def add_requests(session: Session, records: Sequence[dict[str, Any]]) -> int:
    """Insert request-log rows in one statement; returns how many."""
    if not records:
        return 0
    session.execute(RequestLog.__table__.insert(), list(records))
    return len(records)


def request_window(session: Session, start: datetime, end: datetime | None = None,
                   deployment_id: int | None = None) -> list[RequestLog]:
    """Request-log rows with ``start <= arrival_at < end``, oldest first."""
    query = select(RequestLog).where(RequestLog.arrival_at >= start).order_by(RequestLog.arrival_at,
                                                                              RequestLog.id)
    if end is not None:
        query = query.where(RequestLog.arrival_at < end)
    if deployment_id is not None:
        query = query.where(RequestLog.deployment_id == deployment_id)
    return list(session.scalars(query))
