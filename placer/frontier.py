"""The cost–latency frontier: the BCR optimum (and its USD per million tokens) at each SLA.

in:  a Scenario, which SLA to vary (``ttft``: the P90 TTFT; ``tpot``: the TPOT), the values
     (:func:`placer.sim.sweep.parse_values`' syntax), the baselines to solve beside it
out: one row per (value, plan) — the PDD plan and each baseline of :mod:`placer.baselines`
     re-solved at that SLA — with BCR, cost, goodput, $/Mtoken (output and input), the
     plan's TTFT P90 and TPOT and its roles; ``frontier.csv`` and ``frontier.png``
     (:func:`write_frontier`): BCR and $/M output tokens against the SLA, every plan on the
     same axes.

Each SLA value is one task — a Ray task like ``placer sweep``'s (a local Ray by default,
a cluster by address), or in this process with ``use_ray=False``. Ray and matplotlib are
imported only inside the functions that need them. The SLA values are checked (finite,
> 0) before any task starts. A plan that cannot meet an SLA at all shows as its row's
status, never as a failed run: the curve simply ends there.
"""

from __future__ import annotations

import math
from pathlib import Path

from placer.baselines import BASELINES, solve_baseline
from placer.errors import InputError, PlacerError
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim.sweep import on_ray, write_csv_and_plot
from placer.specs import Scenario, parse_scenario

VARY = ("ttft", "tpot")
PDD = "pdd"
COLUMNS = ("value", "plan", "status", "bcr_requests_per_usd", "cost_usd_per_h", "goodput_rps",
           "usd_per_million_output_tokens", "usd_per_million_input_tokens", "ttft_p90_s", "tpot_s", "roles", "error")
_LABELS = {"ttft": "TTFT P90 SLA (s)", "tpot": "TPOT SLA (s)"}


def sla_variant(scenario: Scenario, vary: str, value: float) -> Scenario:
    """``scenario`` with its TTFT P90 (``ttft``) or TPOT (``tpot``) SLA set to ``value`` seconds."""
    if vary not in VARY:
        raise InputError(f"--vary: unknown {vary!r}; choose one of {', '.join(VARY)}")
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"--values: each {vary} SLA must be a finite number of seconds > 0, got {value}")
    field = "ttft_p90_s" if vary == "ttft" else "tpot_s"
    return scenario.model_copy(update={"sla": scenario.sla.model_copy(update={field: value})})


def check_baselines(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise InputError(f"--baselines: unknown {', '.join(map(repr, unknown))}; known: {', '.join(BASELINES)}")
    return names


def _row(value: float, name: str, plan) -> dict:
    m = plan.metrics
    return {"value": value, "plan": name, "status": _status(plan), "bcr_requests_per_usd": m.bcr_requests_per_usd,
            "cost_usd_per_h": m.cost_usd_per_h, "goodput_rps": m.goodput_rps,
            "usd_per_million_output_tokens": m.usd_per_million_output_tokens,
            "usd_per_million_input_tokens": m.usd_per_million_input_tokens, "ttft_p90_s": m.ttft_p90_s,
            "tpot_s": m.tpot_s, "roles": "+".join(sorted({p.role for p in plan.pools if p.count > 0})), "error": ""}


def frontier_point(scenario_data: dict, vary: str, value: float, baselines: list[str], solver: str,
                   time_limit_s: float) -> list[dict]:
    """The PDD optimum and each baseline at one SLA value (runs inside a Ray task or in-process)."""
    config = SolveConfig("bcr", solver, time_limit_s, marginals=False)
    rows = []
    try:
        problem = resolve(sla_variant(parse_scenario(scenario_data), vary, value))
    except PlacerError as err:
        return [{"value": value, "plan": PDD, "status": "no plan", "error": str(err)}]
    for name in (PDD, *baselines):
        try:
            plan = optimize(problem, config) if name == PDD else solve_baseline(problem, name, config)
        except PlacerError as err:
            rows.append({"value": value, "plan": name, "status": "no plan", "error": str(err)})
            continue
        rows.append(_row(value, name, plan))
    return rows


def _status(plan) -> str:
    """ok, or how a baseline fell short (:func:`placer.baselines.solve_baseline`'s notes)."""
    if any("cannot meet the TTFT SLA" in n for n in plan.notes):
        return "misses SLA"
    if any("cannot carry the whole offered load" in n for n in plan.notes):
        return "partial load"
    return "ok"


def run_frontier(scenario: Scenario, vary: str, values: list[float], baselines: list[str] | None = None,
                 address: str | None = None, use_ray: bool = True, solver: str = "ortools",
                 time_limit_s: float = 30.0) -> list[dict]:
    """Rows for every value (in the order given) and plan (PDD first, then ``baselines``)."""
    scenario.single_model("placer frontier")
    if not values:
        raise InputError("--values: give at least one value")
    for v in values:  # bad values fail here, before any task starts
        sla_variant(scenario, vary, v)
    names = check_baselines(list(BASELINES if baselines is None else baselines))
    data = scenario.model_dump(mode="json", exclude_none=True)
    args = [(data, vary, v, names, solver, time_limit_s) for v in values]
    if not use_ray:
        return [row for a in args for row in frontier_point(*a)]
    return [row for rows in on_ray(frontier_point, args, address) for row in rows]


def write_frontier(rows: list[dict], out_dir: str | Path, vary: str, title: str = "") -> tuple[Path, Path]:
    """``frontier.csv`` and ``frontier.png`` in ``out_dir`` (created)."""
    return write_csv_and_plot(rows, out_dir, "frontier", COLUMNS, lambda png: _plot(rows, png, vary, title))


def _plot(rows: list[dict], path: Path, vary: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    for i, name in enumerate(dict.fromkeys(r["plan"] for r in rows)):
        mine = [r for r in rows if r["plan"] == name and r["status"] != "no plan"]
        # PDD on top, thick; the baselines dashed underneath (one often coincides with another)
        style = {"fmt": "o-", "lw": 2.5, "ms": 8, "zorder": 3} if name == PDD else \
            {"fmt": "s--", "lw": 1.2, "ms": 5, "zorder": 2, "alpha": 0.8}
        fmt = style.pop("fmt")
        ax1.plot([r["value"] for r in mine], [r["bcr_requests_per_usd"] for r in mine], fmt, color=f"C{i}",
                 label=name, **style)
        priced = [r for r in mine if r.get("usd_per_million_output_tokens") is not None]
        ax2.plot([r["value"] for r in priced], [r["usd_per_million_output_tokens"] for r in priced], fmt,
                 color=f"C{i}", label=name, **style)
    ax1.set_ylabel("BCR (SLA requests per USD)")
    ax2.set_ylabel("USD per million output tokens")
    ax2.set_xlabel(_LABELS[vary])
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title or f"frontier over the {vary} SLA")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
