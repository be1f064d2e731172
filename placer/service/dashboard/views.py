"""The dashboard pages: server-rendered HTML (Jinja2), reading through ``db.repo`` like the API.

=============================  ==========================================================
``/ui/``                       stored plans, filtered by scenario and objective, paged
                               (``/`` and ``/ui`` redirect here, with their query)
``/ui/plans/{id}``             one plan: diagram (inline SVG), metrics, pools (with
                               utilisation and KV memory), lines, why this plan
                               (:func:`placer.report.why.explain` against the stored
                               scenario), binding constraints by marginal value, routes
                               grouped by pipeline and datacenter pair
``/ui/plans/{a}/diff/{b}``     pool count changes, route changes, metric deltas
``/ui/jobs``                   replanning jobs with their recent runs and decisions
``/ui/diff?a=&b=``             the compare form's target: redirects to the diff page
``/ui/login``, ``/ui/logout``  see :mod:`placer.service.dashboard.auth`
=============================  ==========================================================
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from markupsafe import escape

from db import repo
from db.errors import NotFoundError
from placer.errors import PlacerError
from placer.optimize import OBJECTIVES
from placer.plan import Plan, parse_plan
from placer.report import inline_svg, plan_diagram, tables
from placer.optimize import as_problem, evaluate_plan
from placer.report.diagram import datacenter_order
from placer.report.why import explain
from placer.specs import parse_scenario
from placer.service.api.deps import SessionDep
from placer.service.api.schemas import MAX_ID
from placer.service.dashboard import auth
from placer.service.dashboard.auth import Viewer
from placer.service.jobs.diff import plan_diff
from placer.service.store import stored_plan

SORTS = {"created_at": "newest", "bcr_requests_per_usd": "BCR", "cost_usd_per_h": "cost",
         "goodput_rps": "goodput", "id": "id"}
#: diff page: metric → (label, 1 if higher is better, -1 if lower is better, 0 neither)
METRIC_LABELS = {
    "bcr_requests_per_usd": ("BCR (SLA requests per USD)", 1), "cost_usd_per_h": ("cost (USD/h)", -1),
    "goodput_rps": ("SLA goodput (req/s)", 1), "ttft_p50_s": ("TTFT P50 (s)", -1), "ttft_p90_s": ("TTFT P90 (s)", -1),
    "ttft_p99_s": ("TTFT P99 (s)", -1), "tpot_s": ("TPOT (s)", -1), "wan_gbit_per_s": ("WAN (Gbit/s)", 0),
    "rld_token_share": ("RLD share of output tokens", 0),
}
PAGE = 50
RUNS_PER_JOB = 10

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
router = APIRouter(include_in_schema=False)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else ""


templates.env.filters["when"] = _when
templates.env.filters["num"] = lambda v, d=2: "" if v is None else f"{v:.{d}f}"


@lru_cache(maxsize=128)
def _diagram(plan_json: str, salt: str, order: tuple[str, ...] = ()) -> str:
    plan = parse_plan(json.loads(plan_json))
    fig = plan_diagram(plan, list(order), fixed_order=bool(order))
    try:
        return inline_svg(fig, salt, css_class="diagram")
    finally:
        fig.clear()


def diagram_svg(plan: Plan, salt: str, order: tuple[str, ...] = ()) -> str:
    """The report's plan diagram as inline SVG (cached by the plan's content); a note
    instead when it cannot be drawn here (matplotlib missing). ``order``: datacenters in
    this fixed order (a diff draws both plans with one order)."""
    try:
        return _diagram(plan.model_dump_json(exclude_none=True), salt, order)
    except PlacerError as err:
        return f'<p class="error">The diagram cannot be drawn here: {escape(str(err))}</p>'



def _page(request: Request, name: str, context: dict, code: int = 200) -> HTMLResponse:
    context.setdefault("public", getattr(request.app.state, "dashboard_public", False))
    return templates.TemplateResponse(request, name, context, status_code=code)


def _error(request: Request, code: int, message: str) -> HTMLResponse:
    return _page(request, "error.html", {"title": f"{code}", "message": message}, code)


def _row(session, plan_id: int):
    """The stored plan; NotFoundError also for an id no row can have (outside 1..2^31-1)."""
    if not 1 <= plan_id <= MAX_ID:
        raise NotFoundError("plan", plan_id)
    return repo.get_plan(session, plan_id)


def _load(session, plan_id: int) -> tuple[object, Plan]:
    row = _row(session, plan_id)
    return row, stored_plan(row)


# --- sign in -------------------------------------------------------------------------

@router.get("/ui/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = auth.HOME):
    """The sign-in form. A token in the URL is refused (400), never used: URLs end up in access
    logs, browser history and Referer headers (uvicorn's access log redacts it: ``api.logs``)."""
    target = auth.safe_next(next)
    if "token" in request.query_params:
        return _page(request, "login.html", {"title": "Sign in", "next": target, "wrong": False,
                                             "notice": "A token is not accepted in a URL (it would be written to "
                                                       "logs and history): paste it here instead."},
                     status.HTTP_400_BAD_REQUEST)
    if auth.signed_in(request):
        return RedirectResponse(target, status.HTTP_303_SEE_OTHER)
    return _page(request, "login.html", {"title": "Sign in", "next": target, "wrong": False})


@router.post("/ui/login", response_class=HTMLResponse)
async def login_post(request: Request):
    fields = await auth.form_fields(request)
    return _login(request, fields.get("token", ""), auth.safe_next(fields.get("next")))


def _login(request: Request, token: str, target: str):
    if not auth.token_ok(request, token):
        return _page(request, "login.html", {"title": "Sign in", "next": target, "wrong": True},
                     status.HTTP_403_FORBIDDEN)
    response = RedirectResponse(target, status.HTTP_303_SEE_OTHER)
    auth.set_cookie(response, request)
    return response


@router.get("/ui/logout")
def logout():
    response = RedirectResponse("/ui/login", status.HTTP_303_SEE_OTHER)
    response.delete_cookie(auth.COOKIE, path="/")
    return response


# --- plans ---------------------------------------------------------------------------

@router.get("/")
@router.get("/ui")
def home(request: Request):
    """The dashboard's address is ``/ui/`` (what ``placer serve`` prints); ``/`` and ``/ui`` lead there."""
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"{auth.HOME}{query}", status.HTTP_307_TEMPORARY_REDIRECT)


@router.get(auth.HOME, response_class=HTMLResponse)
def plans(request: Request, session: SessionDep, _: Viewer,
          scenario: Annotated[str | None, Query(max_length=200)] = None,
          objective: Annotated[str | None, Query(max_length=32)] = None,
          sort: Annotated[str, Query(max_length=32)] = "created_at",
          offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    """Stored plans, newest first, with filters."""
    problems = []
    scenario = (scenario or "").strip() or None
    objective = (objective or "").strip() or None
    if objective is not None and objective not in OBJECTIVES:
        problems.append(f"objective {objective!r} is not one of {', '.join(OBJECTIVES)}; filter ignored")
        objective = None
    if sort not in SORTS:
        problems.append(f"sort {sort!r} is not one of {', '.join(SORTS)}; sorted by newest")
        sort = "created_at"
    rows, total = repo.list_plans(session, scenario=scenario, objective=objective, sort=sort,
                                  descending=sort != "cost_usd_per_h", limit=PAGE, offset=offset)
    stored, _ = repo.list_scenarios(session, limit=200)
    names = sorted({s.name for s in stored} | {r.scenario_name for r in rows})
    query = {k: v for k, v in (("scenario", scenario), ("objective", objective), ("sort", sort)) if v}
    return _page(request, "plans.html", {
        "title": "Plans", "rows": rows, "total": total, "offset": offset, "page": PAGE, "problems": problems,
        "scenario": scenario or "", "objective": objective or "", "sort": sort, "sorts": SORTS,
        "objectives": OBJECTIVES, "scenario_names": names, "query": query,
    })


@router.get("/ui/plans/{plan_id}", response_class=HTMLResponse)
def plan_view(plan_id: int, request: Request, session: SessionDep, _: Viewer):
    try:
        row, plan = _load(session, plan_id)
    except NotFoundError as err:
        return _error(request, 404, str(err))
    except PlacerError as err:
        return _error(request, 422, str(err))
    sims, _ = repo.list_simulations(session, plan_id, limit=1)
    sim = sims[0].result if sims else None
    others, _ = repo.list_plans(session, scenario=row.scenario_name, limit=12)
    why, why_missing = plan_why(row, plan)
    return _page(request, "plan.html", {
        "title": f"Plan {plan_id}", "row": row, "plan": plan, "diagram": diagram_svg(plan, f"plan{plan_id}"),
        "metrics": tables.metric_rows(plan, sim), "simulated": sim is not None, "solver": tables.solver_line(plan),
        "pools": tables.pool_rows(plan, why.pools if why else None), "routes": tables.route_rows(plan),
        "links": tables.link_rows(plan), "binding": tables.binding_rows(plan), "why": why,
        "why_missing": why_missing, "others": [o for o in others if o.id != plan_id],
    })


def plan_why(row, plan: Plan):
    """(:func:`placer.report.why.explain` of the plan against the scenario stored with it,
    None) — or (None, the reason it cannot be said) when the row holds no usable scenario."""
    scenario = (row.inputs or {}).get("scenario")
    if not isinstance(scenario, dict):
        return None, "the plan was stored without its scenario, so why it looks so cannot be worked out here"
    try:
        problem = as_problem(parse_scenario(scenario))
        return explain(problem, plan if plan.assignments else evaluate_plan(problem, plan)), None
    except PlacerError as err:
        return None, f"why this plan: its stored scenario does not fit it: {err}"


@router.get("/ui/plans/{plan_id}/plan.json")
def plan_json(plan_id: int, request: Request, session: SessionDep, _: Viewer):
    try:
        return JSONResponse(_row(session, plan_id).plan)
    except NotFoundError as err:
        return _error(request, 404, str(err))


@router.get("/ui/diff")
def diff_form(a: int, b: int, _: Viewer):
    """Any two integers: the diff page answers 404 for an id no plan has (out of range too)."""
    return RedirectResponse(f"/ui/plans/{a}/diff/{b}", status.HTTP_303_SEE_OTHER)


@router.get("/ui/plans/{a}/diff/{b}", response_class=HTMLResponse)
def diff_view(a: int, b: int, request: Request, session: SessionDep, _: Viewer):
    try:
        row_a, plan_a = _load(session, a)
        row_b, plan_b = _load(session, b)
    except NotFoundError as err:
        return _error(request, 404, str(err))
    except PlacerError as err:
        return _error(request, 422, str(err))
    diff = plan_diff(plan_a, plan_b)
    order = tuple(dict.fromkeys([*datacenter_order(plan_a), *datacenter_order(plan_b)]))
    return _page(request, "diff.html", {
        "title": f"Plan {a} → plan {b}", "a": row_a, "b": row_b, "diff": diff, "metric_labels": METRIC_LABELS,
        "diagram_a": diagram_svg(plan_a, f"diff{a}from", order), "diagram_b": diagram_svg(plan_b, f"diff{b}to", order),
    })


# --- jobs ----------------------------------------------------------------------------

@router.get("/ui/jobs", response_class=HTMLResponse)
def jobs_view(request: Request, session: SessionDep, _: Viewer):
    rows, total = repo.list_jobs(session, limit=200)
    jobs = []
    for job in rows:
        runs, n_runs = repo.list_runs(session, job.id, limit=RUNS_PER_JOB)
        jobs.append({"job": job, "runs": runs, "n_runs": n_runs})
    return _page(request, "jobs.html", {"title": "Replanning jobs", "jobs": jobs, "total": total,
                                        "runs_shown": RUNS_PER_JOB})
