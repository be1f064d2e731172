"""CLI commands of the replanning jobs: ``placer jobs add|list|run-now|remove``.

in:  command-line options, with the database URL from :class:`~placer.settings.Settings` when not given
out: replanning jobs stored, listed, run or removed through the functions the API uses (``db.repo``,
     ``placer.service.jobs.runner``)

``jobs`` is a Typer sub-app at module level: the ``placer`` app imports this module only when it runs (the
registry: placer/cli/app.py). The options, errors and database connection it shares with ``serve`` and
``plans`` come from :mod:`placer.service.cli`.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.orm import Session

import db
from db import errors as db_errors
from db import repo
from db.models import Job, JobRun
from placer.cli.fold import Fold
from placer.cli.output import out as console
from placer.errors import InputError
from placer.fields import parse_duration
from placer.optimize import OBJECTIVES
from placer.service.cli import DatabaseOpt, JsonOpt, connect, handled, stored_scenario_id, validation_message
from placer.service.errors import NotFoundError
from placer.service.jobs import runner
from placer.service.jobs.specs import Policy, Schedule, WorkloadSource

JobRef = Annotated[str, typer.Argument(help="Job name or id.", show_default=False)]
Mode = enum.Enum("Mode", {m: m for m in ("propose", "apply")}, type=str)
Objective = enum.Enum("Objective", {o: o for o in OBJECTIVES}, type=str)
Solver = enum.Enum("Solver", {s: s for s in ("ortools", "ortools-highs", "ortools-scip", "pulp")}, type=str)


jobs = typer.Typer(name="jobs", no_args_is_help=True,
                   help="Scheduled replanning jobs: re-fit the workload, re-solve, propose or apply a change.")


def _job_dict(job: Job, last_run: JobRun | None = None) -> dict:
    return {
        "id": job.id, "name": job.name, "scenario_id": job.scenario_id, "scenario": job.scenario.name,
        "schedule": job.schedule, "workload": job.workload, "policy": job.policy, "objective": job.objective,
        "solver": job.solver, "time_limit_s": job.time_limit_s, "enabled": job.enabled,
        "current_plan_id": job.current_plan_id,
        "last_adopted_at": job.last_adopted_at.isoformat() if job.last_adopted_at else None,
        "last_run": None if last_run is None else {
            "id": last_run.id, "status": last_run.status.value,
            "outcome": last_run.outcome.value if last_run.outcome else None, "reason": last_run.reason,
            "error": last_run.error},
    }


def _find_job(session: Session, ref: str) -> Job:
    row = repo.find_job(session, ref)
    if row is None and ref.isdigit():
        try:
            row = repo.get_job(session, int(ref))
        except db_errors.NotFoundError:
            row = None
    if row is None:
        raise NotFoundError("job", ref)
    return row


def _workload_source(request_log: str | None, window: str | None) -> dict[str, Any]:
    """``--request-log FILE|db`` (and ``--request-log-window``) → the job's workload source.

    The same value ``placer deploy --request-log`` was given: a file (the request log it writes,
    or any trace of the docs/contracts.md format) is read at each run, whole or its last window;
    ``db`` reads the service database's request log over the window (default 1 h). A window
    alone means ``db``.
    """
    if request_log is None and window is None:
        raise InputError("give --request-log FILE (a request log or trace) or --request-log db "
                         "(the service database; --request-log-window sets how far back)")
    if request_log is None or request_log == "db":
        return {"kind": "request_log", "window_s": parse_duration(window or "1h", "--request-log-window")}
    path = Path(request_log)
    if not path.is_file():
        raise InputError(f"--request-log: no file {request_log!r} (placer deploy --request-log {request_log} "
                         "writes it from the first request served; or give 'db')")
    source: dict[str, Any] = {"kind": "trace", "path": str(path.resolve())}
    if window is not None:
        source["window_s"] = parse_duration(window, "--request-log-window")
    return source


def _job_spec(every: str | None, cron: str | None, request_log: str | None, request_log_window: str | None,
              mode: str, min_gain: float, max_pool_changes: int | None, cooldown: str, deploy_url: str | None,
              time_limit: float, apply_timeout: str = "10m") -> dict[str, Any]:
    """The job's schedule, workload and policy mappings from the options (InputError naming the option)."""
    if every is not None and cron is not None:
        raise InputError("give at most one of --every and --cron (neither: the job runs only on run-now)")
    schedule = ({"kind": "interval", "seconds": parse_duration(every, "--every")} if every is not None
                else {"kind": "cron", "expr": cron} if cron is not None else {"kind": "manual"})
    workload = _workload_source(request_log, request_log_window)
    if not 0 < time_limit <= 600:
        raise InputError(f"--time-limit must be in (0, 600] seconds, got {time_limit}")
    try:
        return {
            "schedule": TypeAdapter(Schedule).validate_python(schedule).model_dump(),
            "workload": TypeAdapter(WorkloadSource).validate_python(workload).model_dump(),
            "policy": Policy(mode=mode, min_bcr_gain_pct=min_gain, max_pool_changes=max_pool_changes,
                             cooldown_s=parse_duration(cooldown, "--cooldown", zero_ok=True), deploy_url=deploy_url,
                             apply_timeout_s=parse_duration(apply_timeout, "--apply-timeout")).model_dump(),
        }
    except ValidationError as e:
        raise InputError(validation_message(e)) from None


@jobs.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Job name (unique).", show_default=False)],
    scenario: Annotated[str, typer.Option(
        help="Stored scenario (name or id), or a scenario file to store.", show_default=False)],
    every: Annotated[str | None, typer.Option(
        help="Interval schedule, e.g. 15m, 1h, 1d (no --every or --cron: it runs only on run-now).")] = None,
    cron: Annotated[str | None, typer.Option(help="Cron schedule (5 fields, UTC), e.g. '0 * * * *'.")] = None,
    request_log: Annotated[str | None, typer.Option(
        "--request-log", "--trace", metavar="FILE|db",
        help="Fit the workload from a request log: what placer deploy --request-log was given, a JSONL file "
        "(or a trace of the same format) or 'db' (the service database).")] = None,
    request_log_window: Annotated[str | None, typer.Option(
        "--request-log-window", help="Fit the requests of this last window, e.g. 24h (db: default 1h; a file: "
        "default the whole file). Fewer than 20 requests in it: the run is SKIPPED.")] = None,
    mode: Annotated[Mode, typer.Option(help="propose (store for review) or apply (adopt and deploy).")] =
        Mode.propose,
    min_gain: Annotated[float, typer.Option("--min-gain", help="Minimum BCR gain, percent.")] = 5.0,
    max_pool_changes: Annotated[int | None, typer.Option(help="Hold back plans changing more pools.")] = None,
    cooldown: Annotated[str, typer.Option(help="Minimum time between adoptions, e.g. 6h.")] = "0",
    deploy_url: Annotated[str | None, typer.Option(
        help="apply mode: the running deployment's server (placer deploy); adopted plans are applied "
        "to it live.")] = None,
    apply_timeout: Annotated[str, typer.Option(
        help="apply mode: how long applying a plan to the deployment may take, e.g. 10m (not the solver's "
        "limit); past it the run is FAILED and the plan not adopted.")] = "10m",
    objective: Annotated[Objective, typer.Option(help="What the solve optimises.")] = Objective.bcr,
    solver: Annotated[Solver, typer.Option(help="MILP backend.")] = Solver.ortools,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Solver time limit, seconds.")] = 30.0,
    disabled: Annotated[bool, typer.Option("--disabled", help="Store it without scheduling it.")] = False,
    database_url: DatabaseOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Add a replanning job (the running service picks it up within its sync interval)."""
    with handled():
        spec = _job_spec(every, cron, request_log, request_log_window, mode.value, min_gain, max_pool_changes,
                         cooldown, deploy_url, time_limit, apply_timeout)
        factory = connect(database_url)
        with db.session_scope(factory) as session:
            row = repo.create_job(session, name=name, scenario_id=stored_scenario_id(session, scenario), **spec,
                                  objective=objective.value, solver=solver.value, time_limit_s=time_limit,
                                  enabled=not disabled)
            session.flush()
            session.refresh(row)
            job = _job_dict(row)
    if json_out:
        print(json.dumps(job, indent=2))
    else:
        print(f"added job {job['id']} {job['name']!r} on scenario {job['scenario']!r}")


def _jobs_table(listed: list[dict]) -> Fold:
    """The jobs as a table that folds to one block per job on a narrow terminal (names are user
    strings: plain text, never Rich markup)."""
    rows = []
    for j in listed:
        kind = j["schedule"]["kind"]
        sched = (f"every {j['schedule']['seconds']:g} s" if kind == "interval"
                 else f"cron {j['schedule']['expr']}" if kind == "cron" else "run-now only")
        source = j["workload"]
        last = f", last {source['window_s']:g} s" if source.get("window_s") else ""
        work = (f"file {Path(source['path']).name}{last}" if source["kind"] == "trace"
                else f"request log db{last}")
        pol = j["policy"]
        policy = f"{pol['mode']} ≥{pol['min_bcr_gain_pct']:g} %"
        last = j["last_run"]
        last_text = "-" if last is None else f"{last['id']}: {last['outcome'] or last['status']}"
        cells = (str(j["id"]), j["name"] + ("" if j["enabled"] else " (disabled)"), j["scenario"], sched,
                 work, policy, str(j["current_plan_id"] or "-"), last_text)
        rows.append(list(cells))
    return Fold("replanning jobs", ["id", "name", "scenario", "schedule", "workload", "policy", "current plan",
                                    "last run"], rows, right=["id"])


@jobs.command("list")
def list_(database_url: DatabaseOpt = None, json_out: JsonOpt = False) -> None:
    """The replanning jobs with their last run."""
    with handled():
        factory = connect(database_url)
        with factory() as session:
            rows, _ = repo.list_jobs(session, limit=100_000)
            listed = []
            for row in rows:
                runs, _ = repo.list_runs(session, row.id, limit=1)
                listed.append(_job_dict(row, runs[0] if runs else None))
    if json_out:
        print(json.dumps(listed, indent=2))
        return
    console.print(_jobs_table(listed))


@jobs.command("run-now")
def run_now(job: JobRef, database_url: DatabaseOpt = None, json_out: JsonOpt = False) -> None:
    """Run a job once, now, in this process (a run already in progress makes this one SKIPPED)."""
    with handled():
        factory = connect(database_url)
        with factory() as session:
            job_id = _find_job(session, job).id
        run_id, _ = runner.run_now(factory, job_id)
        with factory() as session:
            run = repo.get_run(session, run_id)
            result = {"run_id": run.id, "job_id": job_id, "status": run.status.value,
                      "outcome": run.outcome.value if run.outcome else None, "reason": run.reason,
                      "error": run.error, "plan_id": run.plan_id, "baseline_bcr": run.baseline_bcr,
                      "new_bcr": run.new_bcr, "gain_pct": run.gain_pct,
                      "pool_changes": run.diff["pool_changes"] if run.diff else None}
    if json_out:
        print(json.dumps(result, indent=2))
    elif result["status"] == "FAILED":
        print(f"run {result['run_id']} of job {job_id} FAILED: {result['error']}")
    else:
        gain = "" if result["gain_pct"] is None else f" (BCR gain {result['gain_pct']:+.2f} %)"
        print(f"run {result['run_id']} of job {job_id}: {result['outcome']}{gain}; {result['reason']}"
              + (f"; new plan {result['plan_id']}" if result["plan_id"] else ""))
    if result["status"] == "FAILED":
        raise typer.Exit(1)


@jobs.command("remove")
def remove(job: JobRef, database_url: DatabaseOpt = None) -> None:
    """Remove a job and its runs (its plans and deployments stay)."""
    with handled():
        factory = connect(database_url)
        with db.session_scope(factory) as session:
            row = _find_job(session, job)
            job_id, job_name = row.id, row.name
            repo.delete_job(session, job_id)
    print(f"removed job {job_id} {job_name!r}")
