"""Charts of a plan against its alternatives (matplotlib Figures; nothing is written here).

* :func:`baseline_bars` — BCR, cost and SLA goodput of PDD beside each PD baseline
* :func:`ttft_cdf` — simulated TTFT distribution: PDD, naive cross-DC, same-DC
* :func:`timeline` — RLD share of output tokens and WAN Gbit/s over simulated time
* :func:`bathtub` — BCR against mean prefix hit rate from a ``placer sweep`` CSV
"""

from __future__ import annotations

import csv
import math
import textwrap
from pathlib import Path

from placer.errors import InputError
from placer.plan import Plan
from placer.report.figures import new_figure
from placer.report.simdata import SimRun, cdf_points, rld_share_series
from placer.report.headline import headline
from placer.report.tables import PDD_BEST, compared

PDD_COLOR = "#3b6fb6"
BASELINE_COLORS = {"same-dc-pd": "#7f8c8d", "cross-dc-pd": "#c0392b", "hetero-same-dc-pd": "#b7950b",
                   "prfaas": "#8e44ad", "agg": "#27ae60"}
LABELS = {"pdd": "PDD", "same-dc-pd": "same-DC PD", "cross-dc-pd": "naive cross-DC PD",
          "hetero-same-dc-pd": "hetero same-DC PD", "prfaas": "PrfaaS (remote prefill)", "agg": "aggregated"}
TICKS = {"pdd": "PDD", "same-dc-pd": "same-DC PD", "cross-dc-pd": "cross-DC PD",
         "hetero-same-dc-pd": "hetero same-DC PD", "prfaas": "PrfaaS", "agg": "agg", "pdd, best BCR": "PDD, best BCR"}


def wrap_title(text: str, fig_width_in: float, fontsize: float = 10) -> str:
    """``text`` broken into lines that fit a figure ``fig_width_in`` inches wide at ``fontsize`` points
    (each of its lines wrapped on its own; a character taken as 0.55 em wide)."""
    width = max(40, int(fig_width_in * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(line, width) for line in text.splitlines())


def run_color(name: str) -> str:
    """The color of a run in every chart: PDD blue, each baseline its own (its scaled twin the same)."""
    return PDD_COLOR if name in ("pdd", PDD_BEST) else BASELINE_COLORS.get(name.removesuffix(", scaled"), "#95a5a6")


def baseline_bars(comparison: dict):
    """Three panels (BCR, cost, goodput): PDD (and, dotted, PDD at its best BCR within the inventory
    when a baseline is shown at partial load) and each baseline (and its equal-load scaled
    twin, hatched); a baseline without a plan is marked "no plan" at zero. The title is
    :func:`placer.report.headline.headline`: the percentage with the load it holds at."""
    entries = compared(comparison)
    best = comparison.get("pdd_best_within_inventory")
    if isinstance(best, Plan) and best.metrics.served_rps < 0.999 * best.metrics.offered_rps:
        entries.insert(1, (PDD_BEST, best))  # PDD under a partial baseline's rule: like with like
    fig = new_figure(10.5 if len(entries) <= 7 else 1.6 * len(entries), 4.2)
    axes = fig.subplots(1, 3)
    panels = [("bcr_requests_per_usd", "BCR", "SLA requests per USD", "{:.1f}"),
              ("cost_usd_per_h", "Hardware cost", "USD per hour", "{:.2f}"),
              ("goodput_rps", "SLA goodput", "requests per second", "{:.2f}")]
    xs = list(range(len(entries)))
    for ax, (key, title, unit, fmt) in zip(axes, panels):
        values = [getattr(p.metrics, key) if isinstance(p, Plan) else 0.0 for _, p in entries]
        bars = ax.bar(xs, values, color=[run_color(n) for n, _ in entries], width=0.65,
                      hatch=[("//" if n.endswith(", scaled") else ".." if n == PDD_BEST else None)
                             for n, _ in entries], edgecolor="white")
        top = max(values + [1e-9])
        for bar, (name, plan), v in zip(bars, entries, values):
            label = fmt.format(v) if isinstance(plan, Plan) else "no plan"
            ax.text(bar.get_x() + bar.get_width() / 2, v + top * 0.02, label, ha="center", va="bottom",
                    fontsize=8, color="#222222" if isinstance(plan, Plan) else "#c0392b")
        ax.set_xticks(xs, [_tick(n) + ("*" if _caveat(p) else "") for n, p in entries], fontsize=8, rotation=35,
                      ha="right", rotation_mode="anchor")
        ax.set_ylim(0, top * 1.18)
        ax.set_title(title, fontsize=11)
        ax.set_ylabel(unit, fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    # the headline's first line only: its hints are sentences for the page, not a figure title
    fig.suptitle(wrap_title(f"PDD beside the PD baselines ({comparison['pdd'].scenario})\n"
                            f"{headline(comparison).splitlines()[0]}", fig.get_figwidth()), fontsize=10)
    caveats = [n for n, p in entries if _caveat(p)]
    if caveats:
        foot = wrap_title("* carries less than the offered load or misses the TTFT SLA: shown as the most it can do "
                          "(see the table); hatched: scaled to the whole load with more chips; dotted: PDD at its "
                          "best BCR within the inventory", fig.get_figwidth(), 8)
        fig.text(0.01, 0.01, foot, fontsize=8, color="#555555")
        fig.tight_layout(rect=(0, 0.02 + 0.025 * (foot.count("\n") + 1), 1, 1))
    else:
        fig.tight_layout()
    return fig


def _caveat(plan) -> bool:
    """A baseline shown at a reduced load or without the SLA row (placer.baselines)."""
    if not isinstance(plan, Plan):
        return False
    m = plan.metrics
    return m.served_rps < 0.999 * m.offered_rps or any(n.startswith("cannot") for n in plan.notes[1:2])


def _tick(name: str) -> str:
    base = name.removesuffix(", scaled")
    return TICKS.get(base, base) + (", scaled" if base != name else "")


def cdf_style(name: str, label: str, per_request: bool) -> tuple[str, dict]:
    """(legend label, line style) of one plan's CDF: steps from per-request data, else a dashed
    line through the percentiles, said in the label."""
    if not per_request:
        return label + " (percentiles only)", {"ls": "--", "marker": "o", "lw": 1.4}
    return label, {"drawstyle": "steps-post", "lw": 2.2 if name == "pdd" else 1.6}


def measured_words(runs: list[SimRun]) -> str:
    """"4750 measured requests per plan" (a range when the runs differ): the one count the CDF's
    title and the report's caption both give, so they cannot disagree."""
    counts = sorted({int(r.data.get("measured_requests", 0)) for r in runs}) or [0]
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return f"{n} measured requests per plan"


def ttft_cdf(runs: list[SimRun], sla_ttft_p90_s: float | None = None):
    """Cumulative distribution of simulated TTFT, one curve per plan, with the SLA marked."""
    fig = new_figure(8.0, 5.0, layout="constrained")
    ax = fig.subplots()
    lo, hi = math.inf, 0.0
    for run in runs:
        xs, ys = cdf_points(run)
        positive = [x for x in xs if x > 0]
        if positive:
            lo, hi = min(lo, min(positive)), max(hi, max(xs))
        d = run.data
        label = (f"{LABELS.get(run.name, run.name)} at {run.load_rps:.2f} req/s: "
                 f"simulated P50 {d['ttft_p50_s']:.2f} s, P90 {d['ttft_p90_s']:.2f} s")
        label, style = cdf_style(run.name, label, run.per_request)
        ax.plot(xs, ys, color=run_color(run.name), label=label, **style)
    if sla_ttft_p90_s:
        ax.axvline(sla_ttft_p90_s, color="#555555", ls="--", lw=1)
        ax.text(sla_ttft_p90_s, 1.0, f"SLA: P90 ≤ {sla_ttft_p90_s:g} s", fontsize=8, color="#555555", ha="center",
                va="bottom", transform=ax.get_xaxis_transform())
        hi = max(hi, sla_ttft_p90_s)
        lo = min(lo, sla_ttft_p90_s)
    ax.axhline(0.9, color="#999999", ls=":", lw=1)
    if lo < math.inf and hi / lo > 30:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("time to first token (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"TTFT distribution, simulated ({measured_words(runs)})", fontsize=11, pad=16)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    return fig


def timeline(run: SimRun, ilp_rld_share: float | None = None, has_rld: bool = True):
    """Two panels over simulated time: RLD share of output tokens, and Gbit/s on each WAN line."""
    fig = new_figure(8.0, 5.6)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    ts, shares = rld_share_series(run)
    if ts:
        ax1.plot(ts, [100 * s if s is not None else math.nan for s in shares], color="#d9821e", lw=1.6,
                 drawstyle="steps-post", label="per time bin")
    ax1.axhline(100 * run.data["rld_token_share"], color="#d9821e", ls="--", lw=1,
                label=f"whole run {100 * run.data['rld_token_share']:.1f} %")
    if ilp_rld_share is not None:
        ax1.axhline(100 * ilp_rld_share, color="#555555", ls=":", lw=1, label=f"ILP {100 * ilp_rld_share:.1f} %")
    if not has_rld:
        ax1.text(0.5, 0.5, "the plan has no RelayDecode instances: MainDecode emits every token",
                 transform=ax1.transAxes, ha="center", va="center", fontsize=9, color="#555555")
    elif not ts:
        ax1.text(0.5, 0.5, "per-request data not available from the simulator: whole-run share only",
                 transform=ax1.transAxes, ha="center", va="center", fontsize=9, color="#555555")
    ax1.set_ylabel("RLD share of\noutput tokens (%)")
    top = max([100 * v for v in shares if v is not None] + [100 * run.data["rld_token_share"],
                                                          100 * (ilp_rld_share or 0.0), 4.0])
    ax1.set_ylim(0, top * 1.45)
    ax1.set_title("RelayDecode token share and WAN use over simulated time", fontsize=11)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper left", fontsize=8, ncol=3, framealpha=0.95)

    series = run.data.get("series", {})
    t = series.get("t_s", [])
    caps = {f"{l['src']}->{l['dst']}": l["gbit_per_s_capacity"] for l in run.data.get("links", [])}
    drawn = 0
    peak = 0.0
    colors = ["#3b6fb6", "#2e8b57", "#8a5cb8", "#c0392b", "#17a589", "#b7950b"]
    for name, values in sorted(series.get("links_gbit_per_s", {}).items()):
        if not any(v > 0 for v in values):
            continue
        c = colors[drawn % len(colors)]
        ax2.plot(t[:len(values)], values, color=c, lw=1.4, drawstyle="steps-post",
                 label=name.replace("->", "→"))
        peak = max([peak, caps.get(name, 0.0)] + list(values))
        if name in caps:
            ax2.axhline(caps[name], color=c, ls="--", lw=0.9, label=f"{name.replace('->', '→')} capacity")
        drawn += 1
    if not drawn:
        ax2.text(0.5, 0.5, "no traffic crossed a WAN line", transform=ax2.transAxes, ha="center", va="center",
                 fontsize=9, color="#555555")
    else:
        ax2.legend(loc="upper left", fontsize=8, ncol=4, framealpha=0.95)
    ax2.set_ylim(0, max(peak, 1.0) * 1.35)
    ax2.set_ylabel("WAN Gbit/s")
    ax2.set_xlabel("simulated time (s)")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def read_sweep(path: str | Path) -> list[dict]:
    """Rows of a ``placer sweep`` CSV with numbers parsed; InputError naming ``--sweep``."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as err:
        raise InputError(f"--sweep: cannot read {str(path)!r}: {err.strerror}") from None
    except (csv.Error, UnicodeDecodeError) as err:
        raise InputError(f"--sweep: {str(path)!r} is not a CSV file: {err}") from None
    needed = {"value", "status", "ilp_bcr_requests_per_usd", "sim_bcr_requests_per_usd"}
    if not rows or not needed <= set(rows[0]):
        missing = sorted(needed - set(rows[0])) if rows else sorted(needed)
        raise InputError(f"--sweep: {str(path)!r} is not `placer sweep` output (missing columns: "
                         f"{', '.join(missing)})")
    from placer.sim.sweep import TEXT_COLUMNS

    out = []
    for i, row in enumerate(rows, start=2):
        parsed = dict(row)
        for key, text in row.items():
            if key in TEXT_COLUMNS or key is None:
                continue
            try:
                parsed[key] = float(text) if text not in ("", None) else math.nan
            except ValueError:
                raise InputError(f"--sweep: {str(path)!r} line {i}: {key} is not a number: {text!r}") from None
        out.append(parsed)
    return out


def bathtub(rows: list[dict]):
    """BCR (ILP and simulated) against the mean prefix hit rate of each sweep variant."""
    hits = [r.get("mean_hit_rate", math.nan) for r in rows]
    finite = [h for h in hits if not math.isnan(h)]
    by_hit = len({round(h, 6) for h in finite}) > 1
    xs = [100 * h for h in hits] if by_hit else [r["value"] for r in rows]
    order = sorted(range(len(rows)), key=lambda i: xs[i])
    fig = new_figure(8.0, 4.6)
    ax = fig.subplots()
    ok = [i for i in order if rows[i]["status"] == "ok"]
    ax.plot([xs[i] for i in ok], [rows[i]["ilp_bcr_requests_per_usd"] for i in ok], "o--", color="#555555",
            label="ILP prediction", ms=4)
    ax.plot([xs[i] for i in ok], [rows[i]["sim_bcr_requests_per_usd"] for i in ok], "s-", color=PDD_COLOR,
            label="simulated", ms=4, lw=1.8)
    failed = [i for i in order if rows[i]["status"] != "ok"]
    if failed:
        ax.plot([xs[i] for i in failed], [0] * len(failed), "x", color="#c0392b", ms=9, mew=2, clip_on=False,
                label="no plan")
    for i in ok:
        if rows[i].get("plan_changed") == 1:
            ax.axvline(xs[i], color="#999999", ls=":", lw=1)
    ax.set_ylim(bottom=0)
    if by_hit:
        lo, hi = min(xs), max(xs)
        pad = max(2.0, 0.05 * (hi - lo))
        ax.set_xlim(max(0.0, lo - pad), min(100.0, hi + pad))  # a hit rate lives in [0, 100] %
        ax.set_xlabel("mean prefix hit rate (%)")
        ax.set_title("BCR against prefix hit rate (the bathtub)", fontsize=11)
    else:
        ax.set_xlabel("swept value (the CSV does not name the quantity)")
        ax.set_title("BCR across the sweep", fontsize=11)
    ax.set_ylabel("BCR (SLA requests per USD)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
