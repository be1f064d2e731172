"""CLI commands of the service: ``placer serve`` and ``placer jobs add|list|run-now|remove``.

in:  command-line options, with the database URL and the API token from
     :class:`~placer.settings.Settings` when not given
out: a running API (``serve``); replanning jobs stored, listed, run or removed through the
     functions the API uses (``db.repo``, ``placer.service.jobs.runner``)

``serve`` is a plain function and ``jobs`` a Typer sub-app, both at module level: the
``placer`` app imports this module only when one of them runs, so SQLAlchemy sits at the
top (the registry: placer/cli/app.py); the web stack (FastAPI, uvicorn: ~1 s) comes in
only when ``serve`` runs — ``jobs`` and ``plans`` do without it.
"""

from __future__ import annotations

import enum
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

import db
from db import errors as db_errors
from db import repo
from db.models import Job, JobRun
from placer.cli.fold import Fold  # the faces share it: tables that fold on narrow terminals
from placer.cli.output import err, fail
from placer.cli.output import out as console
from placer.errors import InputError, PlacerError
from placer.fields import parse_duration
from placer.optimize import OBJECTIVES
from placer.plan import load_plan
from placer.plancheck import check_plan_or_alone
from placer.service.errors import ConflictError, NotFoundError, typed
from placer.service.jobs import runner
from placer.service.jobs.solve import prepare
from placer.service.jobs.specs import Policy, Schedule, WorkloadSource
from placer.service.store import save_plan
from placer.settings import Settings
from placer.specs import load_scenario

DatabaseOpt = Annotated[str | None, typer.Option(
    "--database-url", help="SQLAlchemy URL (default: PLACER_DATABASE_URL, else a SQLite file in the user's data dir).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
JobRef = Annotated[str, typer.Argument(help="Job name or id.", show_default=False)]

#: Default ports: the service (``placer serve``) 8080, a deployment's server (``placer deploy``) 8000.
SERVE_PORT = 8080
Mode = enum.Enum("Mode", {m: m for m in ("propose", "apply")}, type=str)
Objective = enum.Enum("Objective", {o: o for o in OBJECTIVES}, type=str)
Solver = enum.Enum("Solver", {s: s for s in ("ortools", "ortools-highs", "ortools-scip", "pulp")}, type=str)


def _validation_message(error: ValidationError) -> str:
    parts = []
    for e in error.errors():
        loc = ".".join(str(x) for x in e["loc"])
        parts.append(f"{loc}: {e['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def _settings(**options: Any) -> Settings:
    """Settings from the environment with the command's options on top; bad values exit 2."""
    try:
        return Settings.from_env(**options)
    except ValidationError as e:
        fail(InputError(_validation_message(e)))


@contextmanager
def _errors() -> Iterator[None]:
    """Typed errors and database failures become a message and an exit code, no traceback."""
    try:
        yield
    except PlacerError as e:
        fail(e)
    except db_errors.RepositoryError as e:
        fail(typed(e))
    except SQLAlchemyError as e:
        fail(f"database: {type(e).__name__}: {str(e).splitlines()[0]}")


def _connect(database_url: str | None) -> sessionmaker[Session]:
    _, factory = db.connect(_settings(database_url=database_url).database_url)
    return factory


# --- placer serve -------------------------------------------------------------------

def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (a deployment's server, placer deploy, "
                                            "defaults to 8000).", min=1, max=65535)] = SERVE_PORT,
    database_url: DatabaseOpt = None,
    token: Annotated[str | None, typer.Option(
        help="Bearer token clients must send (default: PLACER_API_TOKEN, else a random one, printed).")] = None,
    scheduler: Annotated[bool, typer.Option(help="Run the replanning scheduler in this service.")] = True,
    workers: Annotated[int, typer.Option(help="Solves and replanning runs at once.", min=1, max=64)] = 2,
    public_docs: Annotated[bool, typer.Option(help="Serve /docs and /openapi.json without the token.")] = False,
) -> None:
    """Run the REST API (FastAPI + uvicorn); migrations create the schema on first start."""
    settings = _settings(database_url=database_url, token=token or None, scheduler=scheduler,
                         solve_workers=workers, public_docs=public_docs)
    generated = None
    if settings.token is None:
        generated = secrets.token_urlsafe(24)
        settings = settings.model_copy(update={"token": generated})
    source = "--token" if token else "PLACER_API_TOKEN"
    err.print(sign_in_hint(host, port, source, generated), highlight=False, markup=False, soft_wrap=True)
    from placer.service.api import create_app  # the web stack: serve alone needs it
    from placer.service.http import serve as serve_http  # uvicorn under the header deadline and connection caps

    serve_http(create_app(settings), host=host, port=port, log_level="info")


def sign_in_hint(host: str, port: int, source: str, generated: str | None = None) -> str:
    """What ``serve`` prints: its URL and how to sign in. A token given by ``source``
    (``--token`` or ``PLACER_API_TOKEN``) is never printed; a ``generated`` one is (nobody else knows it)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    token = (f"token: {generated}  (generated for this run: no --token or PLACER_API_TOKEN was given)"
             if generated else f"token: the one in {source} (not printed)")
    return (f"placer service on {url}  (health: {url}/healthz, API docs: {url}/docs)\n"
            f"dashboard: {url}/ui/ - sign in with the service token; API clients send "
            f"'Authorization: Bearer <token>'\n{token}")


# --- placer jobs --------------------------------------------------------------------

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


def _scenario_id(session: Session, ref: str) -> int:
    """A stored scenario by name or id, or a scenario file stored under its name."""
    path = Path(ref)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.is_file():
        spec = load_scenario(path).model_dump(mode="json", exclude_unset=True)
        prepare(session, spec)
        row = repo.find_scenario(session, spec["name"])
        if row is None:
            return repo.create_scenario(session, spec).id
        if row.spec != spec:
            raise ConflictError(f"a different scenario named {spec['name']!r} is stored already (id {row.id}); "
                                "rename the file's scenario, or pass --scenario with the stored name")
        return row.id
    row = repo.find_scenario(session, ref)
    if row is None and ref.isdigit():
        row = repo.get_scenario(session, int(ref))
    if row is None:
        raise NotFoundError("scenario", ref)
    return row.id


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
        raise InputError(_validation_message(e)) from None


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
    with _errors():
        spec = _job_spec(every, cron, request_log, request_log_window, mode.value, min_gain, max_pool_changes,
                         cooldown, deploy_url, time_limit, apply_timeout)
        factory = _connect(database_url)
        with db.session_scope(factory) as session:
            row = repo.create_job(session, name=name, scenario_id=_scenario_id(session, scenario), **spec,
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
    with _errors():
        factory = _connect(database_url)
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
    with _errors():
        factory = _connect(database_url)
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
    with _errors():
        factory = _connect(database_url)
        with db.session_scope(factory) as session:
            row = _find_job(session, job)
            job_id, job_name = row.id, row.name
            repo.delete_job(session, job_id)
    print(f"removed job {job_id} {job_name!r}")



# --- placer plans -------------------------------------------------------------------

plans = typer.Typer(name="plans", no_args_is_help=True,
                    help="Stored plans: bring a plan made by placer optimize into the service and its dashboard.")


@plans.command("import")
def import_plan(
    plan_file: Annotated[Path, typer.Argument(metavar="PLAN.json", help="A plan (placer optimize --json --out).",
                                              show_default=False)],
    scenario: Annotated[str | None, typer.Option(
        help="Its scenario: stored (name or id), or a scenario file to store; links the plan to it.")] = None,
    database_url: DatabaseOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Store a plan file in the service database (it shows on the dashboard's plans page)."""
    with _errors():
        plan = load_plan(plan_file)
        check_plan_or_alone(None, plan)  # before the database: a plan that cannot deploy is not stored
        factory = _connect(database_url)
        with db.session_scope(factory) as session:
            scenario_id = _scenario_id(session, scenario) if scenario is not None else None
            inputs: dict[str, Any] = {"imported_from": str(plan_file.resolve())}
            if scenario_id is not None:  # linked to a scenario: it must fit it (names, rows, inventory)
                full, checked = prepare(session, dict(repo.get_scenario(session, scenario_id).spec))
                check_plan_or_alone(checked, plan)
                inputs["scenario"] = full  # as a solve stores it: the dashboard's "why this plan" reads it
            row = save_plan(session, plan, inputs=inputs, scenario_id=scenario_id, source="cli")
            session.flush()
            stored = {"id": row.id, "scenario": plan.scenario, "scenario_id": scenario_id,
                      "path": f"/ui/plans/{row.id}"}
    if json_out:
        print(json.dumps(stored, indent=2))
    else:
        print(f"stored plan {stored['id']} ({plan.scenario!r}); on the dashboard at {stored['path']}")
        if scenario_id is None:
            print(f"without its scenario the dashboard cannot say why this plan looks so: import it with "
                  f"--scenario SCENARIO.yaml (the file {plan_file} was solved from)")
