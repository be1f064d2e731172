"""`placer report` of a fleet plan: one report per model, and an index page for the fleet.

in:  a fleet Plan (rows naming their model); optionally its fleet Scenario (or FleetProblem)
out: ``DIR/<model>/report.html`` per model (:func:`placer.report.build.build_report` of that
     model's own plan, :func:`placer.fleetplan.split_plan`) and ``DIR/report.html``: the fleet's
     metrics, each model's side by side and a link to its report; :class:`Report` with every file.

With the scenario, each model's report is drawn against the hardware the fleet plan leaves it
(:func:`placer.fleetcompare.left_for`: the other models' chips, power and line Gbit/s taken
out), so its baselines and simulation see what its share of the plan sees; its plan carries
its own use of each shared line, so a model whose routes cross the WAN shows that use.
"""

from __future__ import annotations

from pathlib import Path

from placer.errors import InputError
from placer.fleet_links import split_with_links
from placer.fleetplan import split_plan
from placer.plan import Plan
from placer.report import tables
from placer.report.build import Report, _environment, build_report


def build_fleet_report(plan: Plan, out_dir: str | Path, scenario=None, sweep_csv=None, **kwargs) -> Report:
    """Each model's report under ``out_dir/<model>`` and the fleet's index (see the module docstring)."""
    names = tuple(plan.models or sorted({p.model for p in plan.pools if p.model}))
    fleet = None
    if scenario is not None:
        from placer.optimize import as_fleet

        fleet = as_fleet(scenario)
        if set(fleet.names) != set(names):
            raise InputError(f"--scenario: the fleet plan's models ({', '.join(names)}) are not the scenario's "
                             f"({', '.join(fleet.names)})")
    parts = split_with_links(plan, fleet) if fleet is not None else split_plan(plan, names)
    out = Path(out_dir)
    files, notes, rows = [], [], []
    for name in names:
        problem = None
        if fleet is not None:
            from placer.fleetcompare import left_for

            problem = left_for(fleet.member(name), [parts[o] for o in names if o != name])
        part = build_report(parts[name], out / name, problem, sweep_csv, **kwargs)
        files += part.files
        notes += [f"{name}: {n}" for n in part.notes]
        m = parts[name].metrics
        rows.append({"name": name, "href": f"{name}/report.html", "bcr": f"{m.bcr_requests_per_usd:.2f}",
                     "cost": f"{m.cost_usd_per_h:.2f}", "served": tables.served_text(parts[name]),
                     "ttft_p90": f"{m.ttft_p90_s:.3f}", "wan": tables.busiest_line(parts[name])})
    html_path = out / "report.html"
    page = _environment().get_template("fleet.html.j2").render(
        plan=plan, rows=rows, metrics=tables.metric_rows(plan), links=tables.link_rows(plan), notes=notes,
        source=kwargs.get("source", ""), scenario=fleet is not None)
    try:
        html_path.write_text(page, encoding="utf-8")
    except OSError as err:
        raise InputError(f"--out: cannot write {str(html_path)!r}: {err.strerror}") from None
    return Report(html_path, [html_path, *files], notes)
