"""`placer report`: a plan (and optionally its scenario and a sweep) → figures + one HTML file.

in:  a Plan; optionally the Scenario it was solved for and a ``placer sweep`` CSV
out: ``DIR/report.html`` (self-contained: figures inlined, no network) and every figure
     as ``DIR/<name>.png`` and ``DIR/<name>.svg``; :class:`Report` lists them and says
     what was left out and why.

What needs what:

* the plan alone: the diagram, metrics, pools, routes, lines, binding constraints;
* with the scenario: PDD beside the baselines (:func:`placer.baselines.compare`, solved
  here), and simulator runs of PDD, the naive cross-DC, the same-DC and the PrfaaS baseline
  (:data:`SIM_BASELINES`, each at the load it carries; one without a plan, or not applicable in
  one datacenter, is noted) for the TTFT CDF and the RLD-share / WAN-use timeline;
* with the scenario, also: why the plan looks so (:func:`placer.report.why.explain`: pool
  utilisation and KV memory, why each pipeline is or is not used, binding rows by
  marginal value, routes grouped), the simulated TPOT CDF, pool utilisation (planned and
  simulated) and cost against SLA goodput of every compared plan;
* with a sweep CSV: the BCR-vs-hit-rate bathtub.

Every TTFT P90 is labelled with where it comes from: "planned" (the ILP's model, in the
tables) or "simulated" (the CDF legends, and the simulated column beside the planned one).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path

from placer.errors import InputError, PlacerError
from placer.pdd import RLD
from placer.plan import Plan
from placer.plancheck import check_plan, single_model_plan
from placer.report import charts, figures, panels, tables
from placer.report.headline import headline
from placer.report.diagram import plan_diagram

SIM_BASELINES = ("cross-dc-pd", "same-dc-pd", "prfaas")


@dataclass
class Figure:
    stem: str
    title: str
    caption: str
    html: str  # inline SVG, or an <img> with a data URI
    files: list[Path] = field(default_factory=list)


@dataclass
class Report:
    html_path: Path
    files: list[Path]
    notes: list[str]
    """What was left out, and why (also printed at the top of the page)."""


def _png_img(fig, alt: str) -> str:
    from markupsafe import escape

    data = base64.b64encode(figures.png_bytes(fig)).decode("ascii")
    return f'<img class="figure" alt="{escape(alt)}" src="data:image/png;base64,{data}">'


@dataclass
class _Gallery:
    """The figures drawn so far, each written under ``out`` as PNG and SVG."""

    out: Path
    figs: list[Figure] = field(default_factory=list)

    def add(self, fig, stem: str, title: str, caption: str, inline_svg: bool = False) -> None:
        html = figures.inline_svg(fig, stem) if inline_svg else _png_img(fig, title)
        files = figures.write(fig, self.out, stem)
        figures.close(fig)
        self.figs.append(Figure(stem, title, caption, html, files))


def _problem_for(plan: Plan, scenario, notes: list[str]):
    """The resolved scenario (None without one), checked to hold the plan's datacenters and chips."""
    if scenario is None:
        return None
    from placer.optimize import as_problem

    problem = as_problem(scenario)
    try:  # names, rows and inventory (another scenario name is noted below, not refused)
        check_plan(problem, plan, other_scenario=True)
    except InputError as err:
        raise InputError(f"--scenario: the plan does not fit scenario {problem.name!r}: {err}") from None
    if problem.name != plan.scenario:
        notes.append(f"the plan was made for scenario {plan.scenario!r}; it is drawn against "
                     f"{problem.name!r} as given")
    return problem


def _baselines(gallery: _Gallery, problem, plan: Plan, solver: str, time_limit_s: float, say) -> dict:
    """Solve the PD baselines beside the plan and draw the bars."""
    from placer.baselines import compare
    from placer.optimize import OBJECTIVES, SolveConfig

    objective = plan.objective if plan.objective in OBJECTIVES else "bcr"
    say("solving the baselines")
    comparison = compare(problem, SolveConfig(objective, solver, time_limit_s), pdd=plan)
    gallery.add(charts.baseline_bars(comparison), "baselines", "PDD beside the PD baselines",
                "Each baseline solved in the same model, prices and SLA (placer compare).")
    return comparison


def _simulations(problem, plan: Plan, comparison: dict, requests: int, seed: int, notes: list[str], say) -> list:
    """Simulator runs of the plan and of SIM_BASELINES (those that have a plan the simulator takes)."""
    from placer.report.simdata import simulate_plan

    say("simulating the plan")
    sims = [simulate_plan(problem, plan, "pdd", requests, seed)]
    for name in SIM_BASELINES:
        base = comparison["baselines"].get(name)
        if not isinstance(base, Plan):
            notes.append(f"TTFT CDF: no {name} curve: {base.get('error', 'no plan') if base else 'not solved'}")
            continue
        say(f"simulating {name}")
        try:
            sims.append(simulate_plan(problem, base, name, requests, seed))
        except PlacerError as err:
            notes.append(f"TTFT CDF: no {name} curve: the simulator refused its plan: {err}")
    return sims


def _simulation_figures(gallery: _Gallery, problem, plan: Plan, sims: list, requests: int, seed: int,
                        notes: list[str]) -> None:
    """The simulated TTFT CDF of every run and the PDD run's RLD-share / WAN-use timeline."""
    if not sims[0].per_request:
        notes.append("the simulator gave no per-request data: the TTFT CDF is drawn through P50/P90/P99 and "
                     "the RLD share over time is left out")
    gallery.add(charts.ttft_cdf(sims, problem.ttft_p90_s), "ttft-cdf", "Simulated TTFT distribution",
                f"{charts.measured_words(sims)} (each plan simulated with {requests} requests, seed {seed}; the "
                "requests before the measured ones warm the simulation up), each plan at the load it carries; the "
                "dashed line is the SLA's P90 TTFT. The legend's P90 is the simulated one (the table's "
                "\"simulated P90\" column); the planned P90 is the ILP model's.")
    gallery.add(panels.tpot_cdf(sims, problem.tpot_s), "tpot-cdf", "Simulated TPOT distribution",
                "Decode seconds per output token after the first, per request, from the same runs; the dashed "
                "line is the SLA's TPOT.")
    has_rld = any(p.role == RLD and p.count > 0 for p in plan.pools)
    gallery.add(charts.timeline(sims[0], plan.metrics.rld_token_share, has_rld), "timeline",
                "RLD token share and WAN use over time",
                "From the simulation of the PDD plan: the share of output tokens RelayDecode emitted, per time bin "
                "of finishing requests, and each WAN line's Gbit/s (dashed: capacity).")


def build_report(plan: Plan, out_dir: str | Path, scenario=None, sweep_csv: str | Path | None = None, *,
                 requests: int = 5000, seed: int = 0, solver: str = "ortools", time_limit_s: float = 30.0,
                 source: str = "", log=None) -> Report:
    """Draw what the inputs allow and write the report; see the module docstring.

    ``scenario``: a :class:`~placer.specs.Scenario` or a resolved Problem, or None.
    ``log``: optional callable for progress lines. Raises InputError for bad inputs (an
    unwritable ``out_dir``, an unreadable sweep, a plan that does not fit the scenario).
    """
    say = log or (lambda _msg: None)
    single_model_plan(plan, "placer report")
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out: cannot create {str(out)!r}: {err.strerror}") from None
    sweep_rows = charts.read_sweep(sweep_csv) if sweep_csv is not None else None
    notes: list[str] = []
    gallery = _Gallery(out)
    problem = _problem_for(plan, scenario, notes)
    gallery.add(plan_diagram(plan, list(problem.dc_names) if problem is not None else None), "plan-diagram",
                "The plan", "Datacenters with their pools (role, chip, tensor-parallel degree, instances) and the "
                "WAN lines with their capacity and the Gbit/s and req/s the plan sends each way.", inline_svg=True)

    comparison = None
    sims: list = []
    why = _why(problem, plan, notes)
    if problem is None:
        notes.append("no scenario given (--scenario): the baseline comparison, the simulated TTFT CDF and the "
                     "RLD-share / WAN-use timeline need it; only what the plan alone shows is drawn")
    else:
        comparison = _baselines(gallery, problem, plan, solver, time_limit_s, say)
        sims = _simulations(problem, plan, comparison, requests, seed, notes, say)
        _simulation_figures(gallery, problem, plan, sims, requests, seed, notes)
        _use_figures(gallery, why, sims, comparison)
    if sweep_rows is not None:
        gallery.add(charts.bathtub(sweep_rows), "bathtub", "BCR against hit rate",
                    f"From {Path(sweep_csv).name}: each variant optimised (ILP) and simulated.")
    else:
        notes.append("no sweep given (--sweep CSV from `placer sweep --vary hit-mean`): no bathtub curve")

    html_path = out / "report.html"
    html = render_html(plan, gallery.figs, notes, comparison, sims[0].data if sims else None, source, why,
                       {s.name: s.data for s in sims})
    try:
        html_path.write_text(html, encoding="utf-8")
    except OSError as err:
        raise InputError(f"--out: cannot write {str(html_path)!r}: {err.strerror}") from None
    files = [html_path] + [p for f in gallery.figs for p in f.files]
    return Report(html_path, files, notes)


def _environment():
    try:
        import jinja2
    except ImportError:
        raise InputError("jinja2 is not installed: install placer[service] to write reports") from None
    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                              autoescape=True, trim_blocks=True, lstrip_blocks=True)


def _why(problem, plan: Plan, notes: list[str]):
    """Why the plan looks so (None without a scenario, or when the plan does not fit it)."""
    if problem is None:
        return None
    from placer.optimize import evaluate_plan
    from placer.report.why import explain

    try:
        return explain(problem, plan if plan.assignments else evaluate_plan(problem, plan))
    except PlacerError as err:
        notes.append(f"why this plan: left out: {err}")
        return None


def _use_figures(gallery: _Gallery, why, sims: list, comparison: dict) -> None:
    """Pool utilisation and KV memory, and cost against SLA goodput of every compared plan."""
    if why is not None and why.pools:
        gallery.add(panels.pool_utilisation(why.pools, sims[0].data if sims else None), "pool-utilisation",
                    "Pool utilisation and KV memory",
                    "Per pool: the planned busy fraction (P: the busiest queue; decode: batch over its design "
                    "batch) beside the simulated one, and KV memory in use against capacity per instance.")
    gallery.add(panels.cost_vs_goodput(comparison), "cost-goodput", "Cost against SLA goodput",
                "Every compared plan; grey lines are equal BCR. Hollow: carries less than the offered load; "
                "square: a baseline scaled to the whole load with more chips than the inventory holds.")


def render_html(plan: Plan, figs: list[Figure], notes: list[str], comparison: dict | None, sim: dict | None,
                source: str = "", why=None, simulated: dict | None = None) -> str:
    """The report page: one file, CSS inline, figures inlined."""
    from placer.report.figures import safe_id

    template = _environment().get_template("report.html.j2")
    return template.render(
        plan=plan, source=source, notes=notes, figures=figs, safe_id=safe_id,
        metrics=tables.metric_rows(plan, sim), simulated=sim is not None, solver=tables.solver_line(plan),
        pools=tables.pool_rows(plan, why.pools if why else None), routes=tables.route_rows(plan),
        links=tables.link_rows(plan), binding=tables.binding_rows(plan), why=why,
        baselines=tables.baseline_rows(comparison, simulated) if comparison else None,
        headline=headline(comparison) if comparison else None,
    )
