"""CLI commands of the service: ``placer serve`` and ``placer plans import``, and what the service's commands
share (``placer jobs``, :mod:`placer.service.jobs_cli`, too): the ``--database-url`` and ``--json`` options,
:func:`handled` (typed and database errors → a message and an exit code) and :func:`connect`.

in:  command-line options, with the database URL and the API token from
     :class:`~placer.settings.Settings` when not given
out: a running API (``serve``); a plan file stored in the service database (``plans import``)

``serve`` is a plain function and ``plans`` a Typer sub-app, both at module level: the
``placer`` app imports this module only when one of them (or ``jobs``) runs, so SQLAlchemy sits at the
top (the registry: placer/cli/app.py); the web stack (FastAPI, uvicorn: ~1 s) comes in
only when ``serve`` runs — ``jobs`` and ``plans`` do without it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

import db
from db import errors as db_errors
from db import repo
from placer.cli.output import err, fail
from placer.errors import InputError, PlacerError
from placer.plan import load_plan
from placer.plancheck import check_plan_or_alone
from placer.service.errors import ConflictError, NotFoundError, typed
from placer.service.jobs.solve import prepare
from placer.service.store import save_plan
from placer.settings import Settings
from placer.specs import load_scenario

DatabaseOpt = Annotated[str | None, typer.Option(
    "--database-url", help="SQLAlchemy URL (default: PLACER_DATABASE_URL, else a SQLite file in the user's data dir).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

#: Default ports: the service (``placer serve``) 8080, a deployment's server (``placer deploy``) 8000.
SERVE_PORT = 8080


def validation_message(error: ValidationError) -> str:
    """A pydantic error as one line: each field's path and what is wrong with it."""
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
        fail(InputError(validation_message(e)))


@contextmanager
def handled() -> Iterator[None]:
    """Typed errors and database failures become a message and an exit code, no traceback."""
    try:
        yield
    except PlacerError as e:
        fail(e)
    except db_errors.RepositoryError as e:
        fail(typed(e))
    except SQLAlchemyError as e:
        fail(f"database: {type(e).__name__}: {str(e).splitlines()[0]}")


def connect(database_url: str | None) -> sessionmaker[Session]:
    """Sessions on ``database_url`` (None: the settings' URL; a bad one exits 2)."""
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


def stored_scenario_id(session: Session, ref: str) -> int:
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
    with handled():
        plan = load_plan(plan_file)
        check_plan_or_alone(None, plan)  # before the database: a plan that cannot deploy is not stored
        factory = connect(database_url)
        with db.session_scope(factory) as session:
            scenario_id = stored_scenario_id(session, scenario) if scenario is not None else None
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
