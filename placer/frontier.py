"""The cost–latency frontier: the BCR optimum (and its USD per million tokens) at each SLA — or
at each value of a scenario knob (:mod:`placer.knobs`: GPU-B's price ratio, the line's bandwidth,
the hit-rate mix, the model), optionally over a second knob (``by``) for a map of where PDD wins.

in:  a Scenario, which knob to vary (``ttft``: the P90 TTFT; ``tpot``: the TPOT; ``price``,
     ``gbit``, ``hit``, ``model``: :mod:`placer.knobs`), the values
     (:func:`placer.sim.sweep.parse_values`' syntax; model names for ``model``), optionally a
     second knob ``by`` and its values (a grid), the baselines to solve beside it
out: one row per (value, plan) — the PDD plan and each baseline of :mod:`placer.baselines`
     re-solved at that SLA — with BCR, cost, goodput, $/Mtoken (output and input), the
     plan's TTFT P90 and TPOT and its roles; ``frontier.csv`` and ``frontier.png``
     (:func:`write_frontier`): BCR and $/M output tokens against the SLA, every plan on the
     same axes. A point of a plan that carries only part of the offered load (status
     ``partial load``, ``served_rps`` < ``offered_rps``) is drawn hollow and labelled with the
     share it carries; an SLA value where a plan has none is marked ✕ on its curve's axis with
     the reason's kind (infeasible, time limit); the row's ``error`` is the whole reason
     (:func:`no_plan_reason`), which the CLI prints under its table.

PDD/baseline ratios, break-even crossings and the map's figure: :mod:`placer.winmap`.

Each SLA value (grid point) is one task — a Ray task like ``placer sweep``'s (a local Ray by default,
a cluster by address), or in this process with ``use_ray=False``. Ray and matplotlib are
imported only inside the functions that need them. The SLA values are checked (finite,
> 0) before any task starts. A plan that cannot meet an SLA at all shows as its row's
status, never as a failed run: the curve simply ends there.
"""

from __future__ import annotations

import math
from pathlib import Path

from placer.baselines import ALIASES, BASELINES, NO_SLA_NOTE, NO_SLA_PARTIAL_NOTE, PARTIAL_NOTE, canonical, \
    solve_baseline
from placer.errors import InfeasiblePlanError, InputError, PlacerError, SolveTimeoutError
from placer.optimize import SolveConfig, optimize
from placer.knobs import KNOBS, LABELS, SLA_KNOBS, check_knob, check_value, chip_pair, problem_variant, \
    scenario_variant, variant
from placer.problem import resolve
from placer.sim.sweep import on_ray, write_csv_and_plot
from placer.specs import Scenario, parse_scenario

VARY = KNOBS
PDD = "pdd"
COLUMNS = ("value", "plan", "status", "bcr_requests_per_usd", "cost_usd_per_h", "goodput_rps",
           "usd_per_million_output_tokens", "usd_per_million_input_tokens", "ttft_p90_s", "tpot_s", "roles", "error",
           "served_rps", "offered_rps", "by")
#: A plan serving less than this share of the offered load is "partial load".
FULL_LOAD = 0.999
_LABELS = LABELS


def sla_variant(scenario: Scenario, vary: str, value: float) -> Scenario:
    """``scenario`` with its TTFT P90 (``ttft``) or TPOT (``tpot``) SLA set to ``value`` seconds."""
    if vary not in SLA_KNOBS:
        raise InputError(f"--vary: unknown SLA {vary!r}; choose one of {', '.join(SLA_KNOBS)}")
    return scenario_variant(scenario, vary, value)


def check_baselines(names: list[str]) -> list[str]:
    """The baselines named, each alias resolved (``splitwise`` → ``hetero-same-dc-pd``, the name its
    rows carry), once each; InputError naming the unknown ones."""
    out, unknown = [], []
    for n in names:
        try:
            name = canonical(n)
        except ValueError:
            unknown.append(n)
            continue
        if name not in out:
            out.append(name)
    if unknown:
        known = ", ".join([*BASELINES, *(f"{a} (= {b})" for a, b in ALIASES.items())])
        raise InputError(f"--baselines: unknown {', '.join(map(repr, unknown))}; known: {known}")
    return out


def _row(value: float, name: str, plan) -> dict:
    m = plan.metrics
    return {"value": value, "plan": name, "status": row_status(plan), "bcr_requests_per_usd": m.bcr_requests_per_usd,
            "cost_usd_per_h": m.cost_usd_per_h, "goodput_rps": m.goodput_rps,
            "usd_per_million_output_tokens": m.usd_per_million_output_tokens,
            "usd_per_million_input_tokens": m.usd_per_million_input_tokens, "ttft_p90_s": m.ttft_p90_s,
            "tpot_s": m.tpot_s, "roles": "+".join(sorted({p.role for p in plan.pools if p.count > 0})), "error": "",
            "served_rps": m.served_rps, "offered_rps": m.offered_rps}


def no_plan_reason(err: PlacerError) -> str:
    """Why a plan has no row at an SLA value, led by its kind: ``infeasible: <what binds>``
    (InfeasiblePlanError already says so), ``time limit: …``, ``bad input: …``, ``solver: …``."""
    text = str(err)
    if isinstance(err, InfeasiblePlanError):
        return text
    kind = "time limit" if isinstance(err, SolveTimeoutError) else "bad input" if isinstance(err, InputError) \
        else "solver"
    return f"{kind}: {text}"


def reason_kind(error: str) -> str:
    """The first words of a :func:`no_plan_reason` (``infeasible``, ``time limit``, …), for a figure."""
    head = error.split(":", 1)[0].strip()
    return head if head in ("infeasible", "time limit", "bad input", "solver") else "no plan"


def frontier_point(scenario_data: dict, vary: str, value, baselines: list[str], solver: str,
                   time_limit_s: float, by: str | None = None, by_value=None,
                   pair: tuple[str, str] | None = None) -> list[dict]:
    """The PDD optimum and each baseline at one knob value (and ``by`` value: one grid point);
    runs inside a Ray task or in-process."""
    config = SolveConfig("bcr", solver, time_limit_s, marginals=False)
    rows = []
    where = {"by": by_value} if by else {}
    try:
        scenario = parse_scenario(scenario_data)
        if by:
            scenario = scenario_variant(scenario, by, by_value)
        problem = variant(scenario, vary, value, pair)
        if by:
            problem = problem_variant(problem, by, by_value, pair)
    except PlacerError as err:
        return [{"value": value, "plan": PDD, "status": "no plan", "error": no_plan_reason(err), **where}]
    for name in (PDD, *baselines):
        try:
            plan = optimize(problem, config) if name == PDD else solve_baseline(problem, name, config)
        except PlacerError as err:
            rows.append({"value": value, "plan": name, "status": "no plan", "error": no_plan_reason(err), **where})
            continue
        rows.append({**_row(value, name, plan), **where})
    return rows


def row_status(plan) -> str:
    """ok, or how a plan fell short: "misses SLA" when its planned figures miss it (``metrics.sla_met``
    false; a plan without that check: a baseline solved without the SLA row, by
    :func:`placer.baselines.solve_baseline`'s note), "partial load" when it leaves load unserved.
    A tail note (a class whose longest prompts cannot meet the SLA) is not a miss: the P90 is the SLA."""
    m = plan.metrics
    dropped = any(n in (NO_SLA_NOTE, NO_SLA_PARTIAL_NOTE) for n in plan.notes)
    if m.sla_met is False or (m.sla_met is None and dropped):
        return "misses SLA"
    if PARTIAL_NOTE in plan.notes or NO_SLA_PARTIAL_NOTE in plan.notes or \
            (m.offered_rps > 0 and m.served_rps < FULL_LOAD * m.offered_rps):
        return "partial load"
    return "ok"


def run_frontier(scenario: Scenario, vary: str, values: list, baselines: list[str] | None = None,
                 address: str | None = None, use_ray: bool = True, solver: str = "ortools",
                 time_limit_s: float = 30.0, by: str | None = None, by_values: list | None = None,
                 chips: tuple[str, str] | None = None, min_served: float | None = None) -> list[dict]:
    """Rows for every value (in the order given; with ``by``, every ``by`` value for each) and
    plan (PDD first, then ``baselines``). ``chips``: (GPU-A, GPU-B) for the ``price`` knob
    (default :func:`placer.knobs.chip_pair`). ``min_served``: ``options.min_served_fraction`` for
    every point — below 1, PDD too may leave load that does not pay unserved, as a baseline within
    its inventory does (its BCR is then the best it reaches on the inventory, not at the whole load)."""
    scenario.single_model("placer frontier")
    if min_served is not None:
        if not 0 < min_served <= 1:
            raise InputError(f"--min-served: a fraction in (0, 1], got {min_served}")
        scenario = scenario.model_copy(update={"options": scenario.options.model_copy(
            update={"min_served_fraction": min_served})})
    check_knob(vary)
    if not values:
        raise InputError("--values: give at least one value")
    for v in values:  # bad values fail here, before any task starts
        check_value(vary, v)
    if by is not None:
        check_knob(by)
        if by == vary:
            raise InputError(f"--by: {by!r} is already the knob varied (--vary); choose another")
        if not by_values:
            raise InputError("--by-values: give at least one value")
        for v in by_values:
            check_value(by, v)
    names = check_baselines(list(BASELINES if baselines is None else baselines))
    pair = chip_pair(resolve(scenario), chips) if "price" in (vary, by) else None
    data = scenario.model_dump(mode="json", exclude_none=True)
    grid = [(v, b) for v in values for b in (by_values if by is not None else [None])]
    args = [(data, vary, v, names, solver, time_limit_s, by, b, pair) for v, b in grid]
    if not use_ray:
        return [row for a in args for row in frontier_point(*a)]
    return [row for rows in on_ray(frontier_point, args, address) for row in rows]


def write_frontier(rows: list[dict], out_dir: str | Path, vary: str, title: str = "") -> tuple[Path, Path]:
    """``frontier.csv`` and ``frontier.png`` in ``out_dir`` (created)."""
    return write_csv_and_plot(rows, out_dir, "frontier", COLUMNS, lambda png: _plot(rows, png, vary, title))


def _partial(r: dict) -> bool:
    served, offered = r.get("served_rps"), r.get("offered_rps")
    return r.get("status") == "partial load" or (
        served is not None and offered and served < FULL_LOAD * offered)


def _label(name: str, rows: list[dict]) -> str:
    """The legend's label: the plan, the share of the load its hollow points carry, and the SLA
    values where it has no plan with the reason's kind."""
    parts = []
    shares = [100 * r["served_rps"] / r["offered_rps"] for r in rows
              if r["status"] != "no plan" and _partial(r) and r.get("offered_rps")]
    if shares:
        lo, hi = min(shares), max(shares)
        parts.append(f"hollow: carries {lo:.0f} % of the load" if round(lo) == round(hi) else
                     f"hollow: carries {lo:.0f}–{hi:.0f} % of the load")
    missing = [r for r in rows if r["status"] == "no plan"]
    if missing:
        kinds = ", ".join(dict.fromkeys(reason_kind(r.get("error", "")) for r in missing))
        at = ", ".join(_fmt(r["value"]) for r in missing)
        parts.append(f"✕ no plan at {at} s: {kinds}")
    return name + (f" ({'; '.join(parts)})" if parts else "")


def _fmt(value) -> str:
    return format(value, "g") if isinstance(value, (int, float)) else str(value)


def _plot(rows: list[dict], path: Path, vary: str, title: str) -> None:
    frontier_figure(rows, vary, title).savefig(path, dpi=110)


def frontier_figure(rows: list[dict], vary: str, title: str = ""):
    """The frontier as a matplotlib Figure (no pyplot): BCR above, USD per million output tokens
    below; hollow markers where a plan carries part of the load, ✕ where it has none."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    fig = Figure(figsize=(11, 7.5))
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    handles = []
    for i, name in enumerate(dict.fromkeys(r["plan"] for r in rows)):
        every = [r for r in rows if r["plan"] == name]
        mine = [r for r in every if r["status"] != "no plan"]
        # PDD on top, thick; the baselines dashed underneath (one often coincides with another)
        style = {"marker": "o", "ls": "-", "lw": 2.5, "ms": 8, "zorder": 3} if name == PDD else \
            {"marker": "s", "ls": "--", "lw": 1.2, "ms": 6, "zorder": 2, "alpha": 0.85}
        for ax, key in ((ax1, "bcr_requests_per_usd"), (ax2, "usd_per_million_output_tokens")):
            pts = [r for r in mine if r.get(key) is not None and not (isinstance(r[key], float) and math.isnan(r[key]))]
            full = [(r["value"], r[key]) if not _partial(r) else (r["value"], math.nan) for r in pts]
            ax.plot([r["value"] for r in pts], [r[key] for r in pts], color=f"C{i}", marker="none",
                    ls=style["ls"], lw=style["lw"], zorder=style["zorder"], alpha=style.get("alpha", 1))
            ax.plot([x for x, _ in full], [y for _, y in full], color=f"C{i}", ls="none", marker=style["marker"],
                    ms=style["ms"], zorder=style["zorder"] + 1)
            part = [r for r in pts if _partial(r)]
            if part:  # hollow: this point carries only part of the offered load
                ax.plot([r["value"] for r in part], [r[key] for r in part], ls="none", marker=style["marker"],
                        ms=style["ms"] + 2, mfc="white", mec=f"C{i}", mew=2, zorder=style["zorder"] + 1)
            for r in every:
                if r["status"] == "no plan":  # ✕ on the axis where the curve has no point
                    ax.plot([r["value"]], [0.0], marker="x", ms=10, mew=2.5, color=f"C{i}", ls="none", zorder=5,
                            transform=ax.get_xaxis_transform(), clip_on=False)
        handles.append(Line2D([], [], color=f"C{i}", ls=style["ls"], lw=style["lw"], marker=style["marker"],
                              ms=style["ms"], label=_label(name, every)))
    if any(_partial(r) for r in rows if r["status"] != "no plan"):
        handles.append(Line2D([], [], ls="none", marker="o", mfc="white", mec="0.3", mew=2, ms=9,
                              label="hollow marker: carries only part of the offered load"))
    if any(r["status"] == "no plan" for r in rows):
        handles.append(Line2D([], [], ls="none", marker="x", color="0.3", mew=2.5, ms=9,
                              label="✕ on the axis: no plan at that SLA (why: frontier.csv 'error')"))
    ax1.set_ylabel("BCR (SLA requests per USD)")
    ax2.set_ylabel("USD per million output tokens")
    ax2.set_xlabel(_LABELS[vary])
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    ax1.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(title or f"frontier over the {vary} SLA")
    fig.tight_layout()
    return fig
