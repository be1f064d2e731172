"""One run of a replanning job: fit → re-solve → evaluate the current plan → decide → store.

in:  a job id (and a trigger: the scheduler, ``run-now``, the API)
out: a ``job_runs`` row with its outcome (see :class:`~db.models.RunOutcome`); the new
     plan stored with its diff against the current plan; on adoption the job's current
     plan moves and, in ``apply`` mode, a deployment is requested.

Duplicate triggers are harmless twice over: a trigger carrying an idempotency key that
was seen before returns the run made for it, and a job's run lock (one conditional
UPDATE of ``jobs.active_run_id``) lets only one run of a job proceed at a time; a run
that finds the lock taken ends SKIPPED without solving.

Warm start: the re-solve gets the current plan as ``warm_start`` (its BCR under the new
workload seeds the Dinkelbach iterations), and the current plan re-evaluated under the
new workload with :func:`placer.optimize.evaluate_plan` (pools fixed, routing re-chosen)
is the baseline the new plan must beat by the policy's threshold.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy.orm import Session, sessionmaker

from db import repo
from db.models import DeploymentStatus, JobRun, RunOutcome, RunStatus
from db.session import session_scope
from db.types import utcnow
from placer.optimize import SolveConfig
from placer.plan import Plan, parse_plan
from placer.service.errors import ConflictError, user_error
from placer.service.jobs import solve, work
from placer.service.jobs.child import ChildInternalError, ChildJobs, internal_words
from placer.service.jobs.deployment import Applied, DeploymentError, apply_plan, running_differs
from placer.service.jobs.diff import plan_diff
from placer.service.jobs.policy import decide
from placer.service.jobs.specs import Policy, RequestLogSource, WorkloadSource
from placer.service.jobs.workload import fit_request_log, fit_trace
from placer.service.store import save_plan

log = logging.getLogger(__name__)

_SOURCE = TypeAdapter(WorkloadSource)
#: The lock outlives a run by this much beyond its solve and evaluation time limits.
LOCK_MARGIN_S = 120.0


@dataclass(frozen=True)
class Trigger:
    """What a trigger did: ``run_id`` to execute when ``created``; else the existing run
    (a repeated idempotency key) or the SKIPPED run (the job's lock was held)."""

    run_id: int
    created: bool
    busy_run_id: int | None = None


def trigger(factory: sessionmaker[Session], job_id: int, trigger: str = "manual",
            idempotency_key: str | None = None) -> Trigger:
    """Create a run and take the job's lock for it (NotFoundError for an unknown job)."""
    with session_scope(factory) as session:
        job = repo.get_job(session, job_id)
        ttl = 2 * job.time_limit_s + LOCK_MARGIN_S
        previous = job.active_run_id
        run, created = repo.create_run(session, job_id, trigger, idempotency_key)
        if not created:
            return Trigger(run.id, False)
        if repo.lock_job(session, job_id, run.id, ttl):
            if previous is not None:  # the lock had expired: its run's process stopped without finishing it
                _abandon(session, previous)
            return Trigger(run.id, True)
        session.refresh(job)
        busy = job.active_run_id
        run.status, run.outcome, run.finished_at = RunStatus.SUCCEEDED, RunOutcome.SKIPPED, utcnow()
        run.reason = f"run {busy} of this job is in progress; this trigger did nothing"
        return Trigger(run.id, False, busy)


def _abandon(session: Session, run_id: int) -> None:
    """A run whose lock expired while it was still PENDING or RUNNING becomes FAILED."""
    stale = session.get(JobRun, run_id)
    if stale is not None and stale.status in (RunStatus.PENDING, RunStatus.RUNNING):
        stale.status, stale.finished_at = RunStatus.FAILED, utcnow()
        stale.error = "abandoned: its lock expired before it finished (the process running it stopped)"


def _finish(session: Session, run_id: int, job_id: int, **fields: Any) -> None:
    run = repo.get_run(session, run_id)
    for key, value in fields.items():
        setattr(run, key, value)
    run.finished_at = utcnow()
    repo.unlock_job(session, job_id, run_id)


def execute(factory: sessionmaker[Session], run_id: int, now: datetime | None = None,
            children: ChildJobs | None = None, margin_s: float = work.JOB_MARGIN_S) -> RunOutcome | None:
    """Carry out a triggered run; returns its outcome (None when it FAILED). With ``children`` (the
    service) the re-solve and re-evaluation run in a child process killed at 2 × the time limit +
    ``margin_s`` or when the service stops (the run FAILS naming why); without, in this thread (the CLI)."""
    with session_scope(factory) as session:
        run = repo.get_run(session, run_id)
        if run.status != RunStatus.PENDING:
            return run.outcome
        job = repo.get_job(session, run.job_id)
        run.status, run.started_at = RunStatus.RUNNING, utcnow()
        job_id, spec = job.id, dict(job.scenario.spec)
        scenario_id, policy = job.scenario_id, Policy.model_validate(job.policy)
        source = _SOURCE.validate_python(job.workload)
        objective, solver, time_limit_s = job.objective, job.solver, job.time_limit_s
        last_adopted_at, current_id = job.last_adopted_at, job.current_plan_id
        current = parse_plan(repo.get_plan(session, current_id).plan) if current_id else None
    now = now or utcnow()
    try:
        return _execute(factory, run_id, job_id, now, spec, scenario_id, policy, source, objective, solver,
                        time_limit_s, last_adopted_at, current_id, current, children, margin_s)
    except Exception as err:
        typed = user_error(err)
        if typed is not None:
            message = str(typed)
        else:
            if not isinstance(err, ChildInternalError):  # the child's traceback is logged already
                log.exception("replanning run %s of job %s failed", run_id, job_id)
            message = internal_words(err)
        with session_scope(factory) as session:
            _finish(session, run_id, job_id, status=RunStatus.FAILED, error=message)
        return None


def _execute(factory, run_id, job_id, now, spec, scenario_id, policy: Policy, source, objective, solver,
             time_limit_s, last_adopted_at, current_id, current: Plan | None, children: ChildJobs | None,
             margin_s: float) -> RunOutcome | None:
    if isinstance(source, RequestLogSource):
        fitted = fit_request_log(source, spec.get("options") or {}, factory, now)
    else:
        fitted = fit_trace(source, spec.get("options") or {}, now)
    if fitted is None:
        where = "" if isinstance(source, RequestLogSource) else f" of {Path(source.path).name}"
        with session_scope(factory) as session:
            _finish(session, run_id, job_id, status=RunStatus.SUCCEEDED, outcome=RunOutcome.SKIPPED,
                    reason=f"fewer than {source.min_requests} requests in the last {source.window_s:g} s{where}")
        return RunOutcome.SKIPPED

    with factory() as session:
        full, scenario = solve.prepare(session, {**spec, "workload": fitted.workload})
        measured = solve.measured_for(session, scenario)
    config = SolveConfig(objective, solver, time_limit_s, marginals=False)
    candidate, baseline = work.call(children, work.replan, full, config, measured or None, current,
                                    deadline=work.replan_deadline(time_limit_s, margin_s),
                                    what=f"replanning run {run_id} of job {job_id}")
    diff = plan_diff(current, candidate) if current is not None else None
    drift = None
    if policy.mode == "apply" and policy.deploy_url and current is not None:
        try:  # the job's idea of the running plan, checked before deciding
            drift = running_differs(policy.deploy_url, current)
        except DeploymentError as err:
            with session_scope(factory) as session:
                _finish(session, run_id, job_id, status=RunStatus.FAILED,
                        error=f"cannot compare the job's current plan {current_id} with the deployment: {err}")
            return None
    decision = decide(policy, has_current=current is not None, baseline=baseline, candidate=candidate,
                      pool_changes=diff["pool_changes"] if diff else 0, offered_rps=fitted.workload["arrival_rps"],
                      last_adopted_at=last_adopted_at, now=now)
    inputs = {"scenario": full, "objective": objective, "solver": solver, "time_limit_s": time_limit_s,
              "marginals": False, "measured": measured, "job_id": job_id, "run_id": run_id}
    adopt = decision.outcome in (RunOutcome.INITIAL, RunOutcome.ADOPTED)
    reason, applied = _deploy(policy, decision.reason, candidate if adopt else None, current, current_id, drift)
    record = {"baseline_plan_id": current_id, "new_bcr": candidate.metrics.bcr_requests_per_usd, "diff": diff,
              "baseline_bcr": baseline.metrics.bcr_requests_per_usd if baseline else None,
              "gain_pct": decision.gain_pct, "workload": fitted.record()}
    with session_scope(factory) as session:
        row = save_plan(session, candidate, inputs=inputs, scenario_id=scenario_id, source=f"job:{job_id}")
        if applied is not None and not applied.ok:
            _finish(session, run_id, job_id, status=RunStatus.FAILED, plan_id=row.id, **record,
                    error=f"{reason}. Not adopted: the job's current plan stays "
                          f"{current_id if current_id is not None else '(none)'}")
            return None
        if adopt:
            job = repo.get_job(session, job_id)
            job.current_plan_id, job.last_adopted_at = row.id, now
            if policy.mode == "apply":
                repo.create_deployment(session, row.id, job_id, note=f"run {run_id}: {decision.reason}",
                                       status=DeploymentStatus.ACTIVE if applied else DeploymentStatus.REQUESTED)
        _finish(session, run_id, job_id, status=RunStatus.SUCCEEDED, outcome=decision.outcome,
                reason=reason, plan_id=row.id, **record)
    return decision.outcome


def _deploy(policy: Policy, reason: str, adopted: Plan | None, current: Plan | None, current_id: int | None,
            drift: str | None) -> tuple[str, Applied | None]:
    """Apply mode with a deployment URL: apply the adopted plan, or the current one again when the
    deployment does not run it (``drift``); outside any transaction. The reason, and what happened."""
    if policy.mode != "apply" or not policy.deploy_url:
        return reason, None
    push = adopted
    if push is None and drift is not None:
        push = current
        reason += f"; the deployment did not run the job's current plan {current_id} ({drift}), so it was applied again"
    if push is None:
        return reason, None
    applied = apply_plan(policy.deploy_url, push, policy.apply_timeout_s)
    return f"{reason}; {applied.words}", applied


def run_now(factory: sessionmaker[Session], job_id: int, idempotency_key: str | None = None,
            now: datetime | None = None, children: ChildJobs | None = None,
            margin_s: float = work.JOB_MARGIN_S) -> tuple[int, RunOutcome | None]:
    """Trigger and execute a run (in this thread, or under ``children`` as :func:`execute`); returns
    (run id, outcome)."""
    t = trigger(factory, job_id, "manual", idempotency_key)
    if not t.created:
        with factory() as session:
            return t.run_id, repo.get_run(session, t.run_id).outcome
    return t.run_id, execute(factory, t.run_id, now, children, margin_s)


#: What a run left PENDING or RUNNING by a stopped service records as its error.
INTERRUPTED = "interrupted by restart: the service stopped while this run was {status}; trigger it again"


def recover_runs(factory: sessionmaker[Session]) -> list[int]:
    """Runs a previous service process left PENDING or RUNNING become FAILED, their locks released.

    Called once at service start-up (``placer.service.api.service.Service.start``), before
    the scheduler starts. A run is not resumed: its workload window has moved on, and the
    next scheduled fire (or a ``run-now``) makes a fresh run. Locks held by runs that no
    longer run (finished, deleted) are released too, so the job accepts a run at once.
    Assumes this process is the only one running replanning jobs on the database at the
    moment it starts (as the solve-job recovery does). Returns the ids of the runs failed.
    """
    with session_scope(factory) as session:
        failed = []
        for run in repo.interrupted_runs(session):
            _finish(session, run.id, run.job_id, status=RunStatus.FAILED,
                    error=INTERRUPTED.format(status=run.status.value))
            failed.append(run.id)
        released = repo.release_stale_locks(session)
    if failed or released:
        log.warning("replanning: %d interrupted run(s) marked FAILED (%s); %d stale lock(s) released",
                    len(failed), ", ".join(map(str, failed)) or "-", released)
    return failed


def adopt(factory: sessionmaker[Session], job_id: int, run_id: int) -> int:
    """Adopt a run's plan as the job's current plan (a user accepting a proposal);
    requests a deployment; returns the deployment id."""
    with session_scope(factory) as session:
        run = repo.get_run(session, run_id, job_id)
        if run.plan_id is None:
            raise ConflictError(f"run {run_id} has no plan to adopt")
        job = repo.get_job(session, job_id)
        if job.current_plan_id == run.plan_id:
            raise ConflictError(f"plan {run.plan_id} is already the current plan of job {job.name!r}")
        job.current_plan_id, job.last_adopted_at = run.plan_id, utcnow()
        dep = repo.create_deployment(session, run.plan_id, job_id, note=f"run {run_id} adopted by a user")
        return dep.id
