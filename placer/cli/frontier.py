"""``placer frontier``: the BCR optimum and its USD per million tokens at each SLA, beside the baselines.

``frontier SCENARIO --vary KNOB --values ... [--by KNOB --by-values ...] [--out DIR]`` →
:func:`placer.frontier.run_frontier` (one Ray task per grid point, like ``sweep``; ``--no-ray`` in
this process); KNOB is an SLA (``ttft``, ``tpot``) or a scenario knob (:mod:`placer.knobs`:
``price``, ``gbit``, ``hit``, ``model``). It prints a table per plan with, under it, why a plan
has none and what share of the load a partial one carries; then the map of where PDD wins
(:mod:`placer.winmap`): PDD/baseline BCR and TTFT P90 ratios per point and the break-even
crossings. ``--out`` writes ``frontier.csv`` and ``frontier.png`` (one knob) and ``map.csv`` and
``map.png``; ``--json`` prints the rows.

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
from placer.errors import InputError, PlacerError
from placer.frontier import VARY, run_frontier, write_frontier
from placer.knobs import SLA_KNOBS
from placer.sim.sweep import parse_values
from placer.winmap import crossing_sentence, crossings, ratios, write_map
from placer.specs import load_scenario

Vary = choices("Vary", VARY)


def _num(value, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def _at(vary: str, value, by: str | None = None, by_value=None) -> str:
    def one(knob, v):
        text = format(v, "g") if isinstance(v, (int, float)) else str(v)
        return f"{knob} {text} s" if knob in SLA_KNOBS else f"{knob} {text}"
    return one(vary, value) + (f", {one(by, by_value)}" if by else "")


def _values(knob: str, text: str) -> list:
    """Numbers (:func:`parse_values`) or, for ``model``, comma-separated catalog names."""
    return [v.strip() for v in text.split(",") if v.strip()] if knob == "model" else parse_values(text)


def _table(rows: list[dict], vary: str, by: str | None = None) -> Fold:
    """The rows as a table, folded to one block per row on a narrow terminal (nothing cut)."""
    headers = ["at" if vary not in SLA_KNOBS or by else "SLA", "plan", "status", "BCR req/USD", "USD/Mtok out",
               "USD/Mtok in", "TTFT P90 s", "TPOT s", "roles"]
    cells = [[_at(vary, r["value"], by, r.get("by")), r["plan"], r["status"],
              _num(r.get("bcr_requests_per_usd"), ".2f"),
              _num(r.get("usd_per_million_output_tokens"), ".3f"), _num(r.get("usd_per_million_input_tokens"), ".3f"),
              _num(r.get("ttft_p90_s"), ".3f"), _num(r.get("tpot_s"), ".4f"), r.get("roles", "")] for r in rows]
    title = f"BCR optimum against the {vary} SLA" if vary in SLA_KNOBS and not by else \
        f"BCR optimum against {vary}" + (f" and {by}" if by else "")
    return Fold(title, headers, cells, right=headers[3:8])


def _map_table(ratio_rows: list[dict], vary: str, by: str | None) -> Fold:
    """Where PDD wins: PDD/baseline BCR and P90 ratios per point and the share each carries."""
    headers = ["at", "baseline", "BCR PDD/it", "P90 PDD/it", "PDD carries", "it carries"]
    cells = [[_at(vary, r["value"], by, r["by"]), r["baseline"], _num(r["bcr_ratio"], ".2f"),
              _num(r["p90_ratio"], ".2f"), _pct(r["pdd_served_share"]), _pct(r["baseline_served_share"])]
             for r in ratio_rows]
    return Fold("where PDD wins: PDD / baseline (BCR > 1 or P90 < 1: PDD ahead)", headers, cells, right=headers[2:])


def _pct(share) -> str:
    return "-" if share is None else f"{100 * share:.0f} %"


def reasons(rows: list[dict], vary: str, by: str | None = None) -> list[str]:
    """One line under the table per row that is not plainly ok: why a plan has none at that SLA
    (its error: infeasible and what binds, or the time limit), the load a partial plan carries."""
    lines = []
    for r in rows:
        where = f"{_at(vary, r['value'], by, r.get('by'))}, {r['plan']}"
        if r["status"] == "no plan":
            lines.append(f"{where}: no plan: {r.get('error') or 'no reason given'}")
        elif r["status"] == "partial load" and r.get("offered_rps"):
            lines.append(f"{where}: partial load: carries {r['served_rps']:.2f} of the {r['offered_rps']:g} req/s "
                         f"offered ({100 * r['served_rps'] / r['offered_rps']:.0f} %); the figure draws it hollow")
    return lines


def frontier(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML (or JSON) file.", show_default=False)],
    vary: Annotated[Vary, typer.Option("--vary", help="What to vary: an SLA (ttft: the TTFT P90, tpot: the TPOT, "
                                       "seconds), GPU-B's price / GPU-A's (price), every line's Gbit/s (gbit), the "
                                       "mix's mean hit rate (hit) or the catalog model (model).")],
    values: Annotated[str, typer.Option("--values", help="Values: comma-separated, or start:stop:count; model "
                                        "names for --vary model.")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="Directory for frontier.csv and frontier.png.")] = None,
    baselines: Annotated[str | None, typer.Option(
        "--baselines", help=f"Comma-separated baselines to solve beside PDD (default all: {','.join(BASELINES)}; "
        "'' for none).")] = None,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster address (default: a local "
                                                "Ray).")] = None,
    use_ray: Annotated[bool, typer.Option("--ray/--no-ray", help="Run SLA values as Ray tasks.")] = True,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Solver time limit per plan, s.")] = 30.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    by: Annotated[Vary | None, typer.Option("--by", help="A second knob for a grid (a map of where PDD "
                                            "wins).")] = None,
    by_values: Annotated[str | None, typer.Option("--by-values", help="The second knob's values.")] = None,
    chips: Annotated[str | None, typer.Option("--chips", help="GPU-A,GPU-B for --vary price (default: the chip "
                                              "the first datacenter holds most of, and another datacenter's).")] = None,
    min_served: Annotated[float | None, typer.Option(
        "--min-served", help="options.min_served_fraction at every point: below 1 PDD too may leave load that "
        "does not pay unserved (its best BCR within the inventory).")] = None,
) -> None:
    """Solve the BCR optimum at each TTFT or TPOT SLA beside the baselines; table, CSV and PNG."""
    knob, by_knob = vary.value, by.value if by is not None else None
    paths, map_paths = None, None
    try:
        loaded = load_scenario(scenario)
        names = None if baselines is None else [b.strip() for b in baselines.split(",") if b.strip()]
        pair = None
        if chips is not None:
            parts = [c.strip() for c in chips.split(",")]
            if len(parts) != 2 or not all(parts):
                fail(InputError(f"--chips: expected two chip names A,B, got {chips!r}"))
            pair = (parts[0], parts[1])
        rows = run_frontier(loaded, knob, _values(knob, values), names, address=address, use_ray=use_ray,
                            time_limit_s=time_limit, by=by_knob,
                            by_values=_values(by_knob, by_values or "") if by_knob else None, chips=pair,
                            min_served=min_served)
        mapped = ratios(rows)
        if out_dir is not None:
            if by_knob is None:
                paths = write_frontier(rows, out_dir, knob, f"{loaded.name}: BCR against {knob}")
            if mapped:
                map_paths = write_map(mapped, out_dir, knob, by_knob, f"{loaded.name}: where PDD wins")
    except PlacerError as e:
        fail(e)
    if json_out:
        out.print_json(json.dumps(rows, default=str))
        return
    out.print(_table(rows, knob, by_knob))
    for line in reasons(rows, knob, by_knob):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    if mapped:
        out.print(_map_table(mapped, knob, by_knob))
        found = crossings(mapped)
        for c in found:
            out.print(crossing_sentence(c, knob, by_knob), highlight=False, markup=False, soft_wrap=True)
        if not found:
            out.print("break-even: no crossing of BCR ratio 1 within the values given", highlight=False)
    for p in (paths, map_paths):
        if p:
            out.print(f"wrote {p[0]} and {p[1]}", highlight=False)
