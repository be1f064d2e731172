"""``placer frontier``: the BCR optimum and its USD per million tokens at each SLA, beside the baselines.

``frontier SCENARIO --vary ttft|tpot --values ... [--out DIR]`` → :func:`placer.frontier.run_frontier`
(one Ray task per SLA value, like ``sweep``; ``--no-ray`` in this process), a table per plan
with, under it, why a plan has none at an SLA and what share of the load a partial one carries,
and with ``--out`` ``frontier.csv`` and ``frontier.png`` (:func:`placer.frontier.write_frontier`);
``--json`` prints the rows.

Mounted lazily by :mod:`placer.cli.app`: imported only when the command runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from placer.baselines import BASELINES
from placer.cli.fold import Fold
from placer.cli.output import choices, fail, out
from placer.errors import PlacerError
from placer.frontier import VARY, run_frontier, write_frontier
from placer.sim.sweep import parse_values
from placer.specs import load_scenario

Vary = choices("Vary", VARY)


def _num(value, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def _table(rows: list[dict], vary: str) -> Fold:
    """The rows as a table, folded to one block per row on a narrow terminal (nothing cut)."""
    headers = ["SLA", "plan", "status", "BCR req/USD", "USD/Mtok out", "USD/Mtok in", "TTFT P90 s",
               "TPOT s", "roles"]
    cells = [[f"{vary} {r['value']:g} s", r["plan"], r["status"], _num(r.get("bcr_requests_per_usd"), ".2f"),
              _num(r.get("usd_per_million_output_tokens"), ".3f"), _num(r.get("usd_per_million_input_tokens"), ".3f"),
              _num(r.get("ttft_p90_s"), ".3f"), _num(r.get("tpot_s"), ".4f"), r.get("roles", "")] for r in rows]
    return Fold(f"BCR optimum against the {vary} SLA", headers, cells, right=headers[3:8])


def reasons(rows: list[dict], vary: str) -> list[str]:
    """One line under the table per row that is not plainly ok: why a plan has none at that SLA
    (its error: infeasible and what binds, or the time limit), the load a partial plan carries."""
    lines = []
    for r in rows:
        where = f"{vary} {r['value']:g} s, {r['plan']}"
        if r["status"] == "no plan":
            lines.append(f"{where}: no plan: {r.get('error') or 'no reason given'}")
        elif r["status"] == "partial load" and r.get("offered_rps"):
            lines.append(f"{where}: partial load: carries {r['served_rps']:.2f} of the {r['offered_rps']:g} req/s "
                         f"offered ({100 * r['served_rps'] / r['offered_rps']:.0f} %); the figure draws it hollow")
    return lines


def frontier(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (or JSON) file.", show_default=False)],
    vary: Annotated[Vary, typer.Option("--vary", help="Which SLA to vary: the TTFT P90 or the TPOT.")],
    values: Annotated[str, typer.Option("--values", help="SLA seconds: comma-separated, or start:stop:count.")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Directory for frontier.csv and frontier.png.")] = None,
    baselines: Annotated[str | None, typer.Option(
        "--baselines", help=f"Comma-separated baselines to solve beside PDD (default all: {','.join(BASELINES)}; "
        "'' for none).")] = None,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster address (default: a local "
                                                "Ray).")] = None,
    use_ray: Annotated[bool, typer.Option("--ray/--no-ray", help="Run SLA values as Ray tasks.")] = True,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Solver time limit per plan, s.")] = 30.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Solve the BCR optimum at each TTFT or TPOT SLA beside the baselines; table, CSV and PNG."""
    try:
        loaded = load_scenario(scenario)
        names = None if baselines is None else [b.strip() for b in baselines.split(",") if b.strip()]
        rows = run_frontier(loaded, vary.value, parse_values(values), names, address=address, use_ray=use_ray,
                            time_limit_s=time_limit)
        paths = write_frontier(rows, out_dir, vary.value, f"{loaded.name}: BCR against the {vary.value} SLA") \
            if out_dir is not None else None
    except PlacerError as e:
        fail(e)
    if json_out:
        out.print_json(json.dumps(rows, default=str))
        return
    out.print(_table(rows, vary.value))
    for line in reasons(rows, vary.value):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    if paths:
        out.print(f"wrote {paths[0]} and {paths[1]}", highlight=False)
