"""Charts of how a plan uses what it pays for (matplotlib Figures; nothing is written here).

* :func:`tpot_cdf` — simulated time per output token, one curve per plan, the TPOT SLA marked
* :func:`pool_utilisation` — each pool's planned utilisation and KV memory beside the simulated one
* :func:`cost_vs_goodput` — every compared plan at (cost, SLA goodput), iso-BCR lines, the
  offered load marked; plans that carry less than the load drawn hollow
"""

from __future__ import annotations

from placer.plan import Plan
from placer.report.charts import LABELS, cdf_style, run_color
from placer.report.figures import new_figure, spread_labels
from placer.report.simdata import SimRun, cdf_points
from placer.report.tables import compared
from placer.shapes import shape_of


def tpot_cdf(runs: list[SimRun], sla_tpot_s: float | None = None):
    """Cumulative distribution of simulated TPOT (decode seconds per token after the first)."""
    fig = new_figure(8.0, 4.6, layout="constrained")
    ax = fig.subplots()
    for run in runs:
        xs, ys = cdf_points(run, metric="tpot")
        d = run.data
        label = (f"{LABELS.get(run.name, run.name)} at {run.load_rps:.2f} req/s: simulated "
                 f"P50 {1000 * d['tpot_p50_s']:.1f} ms, P90 {1000 * d['tpot_p90_s']:.1f} ms")
        label, style = cdf_style(run.name, label, bool(run.tpot_s))
        ax.plot([1000 * x for x in xs], ys, color=run_color(run.name), label=label, **style)
    if sla_tpot_s:
        ax.axvline(1000 * sla_tpot_s, color="#555555", ls="--", lw=1)
        ax.text(1000 * sla_tpot_s, 1.0, f"SLA: TPOT ≤ {1000 * sla_tpot_s:g} ms", fontsize=8, color="#555555",
                ha="center", va="bottom", transform=ax.get_xaxis_transform())
    ax.axhline(0.9, color="#999999", ls=":", lw=1)
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.set_xlabel("time per output token (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TPOT distribution, simulated", fontsize=11, pad=16)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", fontsize=8, frameon=False)
    return fig


def pool_utilisation(usage: list, sim: dict | None = None):
    """Two panels per pool: utilisation (planned, and simulated when given) and KV memory used
    against capacity per instance. ``usage``: :class:`placer.pool_usage.PoolUsage` rows."""
    fig = new_figure(9.0, 4.4)
    ax1, ax2 = fig.subplots(1, 2)
    labels = [f"{u.role} {u.datacenter}\n{u.chip} tp{u.tp} ×{u.count}" for u in usage]
    # a simulation read back from JSON gives tp as the chip count and its shape apart: rebuild the key
    simulated = {(p["role"], p["datacenter"], p["chip"], shape_of(p["tp"], p.get("shape"))): p["utilization"]
                 for p in (sim or {}).get("pools", [])}
    ys = list(range(len(usage)))
    h = 0.38 if simulated else 0.6
    ax1.barh([y - (h / 2 if simulated else 0) for y in ys], [100 * u.utilization for u in usage], height=h,
             color="#3b6fb6", label="planned (ILP model)")
    if simulated:
        ax1.barh([y + h / 2 for y in ys], [100 * simulated.get(u.key, 0.0)
                                           for u in usage], height=h, color="#d9821e", label="simulated")
    ax1.set_yticks(ys, labels, fontsize=7)
    ax1.invert_yaxis()
    ax1.set_xlim(0, 100)
    ax1.set_xlabel("utilisation (%)")
    ax1.set_title("Pool utilisation", fontsize=11)
    ax1.legend(fontsize=7, loc="lower right")
    ax2.barh(ys, [u.kv_gib_capacity for u in usage], height=0.6, color="#d9dee5", label="KV capacity")
    ax2.barh(ys, [u.kv_gib_used for u in usage], height=0.6, color="#2e8b57", label="KV in use (planned)")
    ax2.set_yticks(ys, [""] * len(ys))
    ax2.invert_yaxis()
    ax2.set_xlabel("GiB per instance")
    ax2.set_title("KV memory", fontsize=11)
    ax2.legend(fontsize=7, loc="lower right")
    for ax in (ax1, ax2):
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
    fig.tight_layout()
    return fig


def cost_vs_goodput(comparison: dict):
    """Every compared plan at (cost USD/h, SLA goodput req/s), with lines of equal BCR; a plan
    carrying less than the offered load is hollow, the offered load is a dashed line."""
    fig = new_figure(8.0, 4.8)
    ax = fig.subplots()
    pdd: Plan = comparison["pdd"]
    points = [(n, p) for n, p in compared(comparison)
              if isinstance(p, Plan) and not ((p.model_extra or {}).get("baseline") or {}).get("same_as")]
    twins = {n for n, p in compared(comparison) if isinstance(p, Plan) and
             ((p.model_extra or {}).get("baseline") or {}).get("same_as")}
    top_cost = max(p.metrics.cost_usd_per_h for _, p in points) * 1.15
    top_good = max(pdd.metrics.offered_rps, *(p.metrics.goodput_rps for _, p in points)) * 1.15
    levels: list[float] = []
    labels: list = []  # the points' labels first (they keep their place), the iso-BCR labels after
    iso: list = []
    for bcr in sorted(p.metrics.bcr_requests_per_usd for _, p in points if p.metrics.bcr_requests_per_usd > 0):
        if levels and bcr < levels[-1] * 1.05:
            continue  # lines closer than 5 % would print their labels over each other
        levels.append(bcr)
        bcr = round(bcr)
        ax.plot([0, top_cost], [0, bcr * top_cost / 3600], color="#d9dee5", lw=0.8, zorder=0)
        y = min(top_good * 0.97, bcr * top_cost / 3600)
        iso.append(ax.annotate(f"BCR {bcr:g}", (y * 3600 / bcr, y), textcoords="offset points", xytext=(-2, -2),
                                  fontsize=7, color="#8a96a3", ha="right", va="top"))
    ax.axhline(pdd.metrics.offered_rps, color="#555555", ls="--", lw=1)
    ax.text(0, pdd.metrics.offered_rps, f" offered {pdd.metrics.offered_rps:g} req/s", fontsize=8, color="#555555",
            va="bottom")
    for name, plan in points:
        m = plan.metrics
        full = m.served_rps >= 0.999 * m.offered_rps
        color = run_color(name.removesuffix(", scaled"))
        ax.scatter([m.cost_usd_per_h], [m.goodput_rps], s=70 if name == "pdd" else 50,
                   facecolors=color if full else "none", edgecolors=color, linewidths=1.6,
                   marker="s" if name.endswith(", scaled") else "o", zorder=3)
        base = name.removesuffix(", scaled")
        label = LABELS.get(base, base) + (", scaled" if base != name else "") + \
            "".join(f" = {LABELS.get(t, t)}" for t in twins if name == "same-dc-pd")
        labels.append(ax.annotate(label, (m.cost_usd_per_h, m.goodput_rps), textcoords="offset points",
                                  xytext=(7, 4), fontsize=8))
    ax.set_xlim(0, top_cost)
    ax.set_ylim(0, top_good)
    ax.set_xlabel("hardware cost (USD/h)")
    ax.set_ylabel("SLA goodput (req/s)")
    ax.set_title("Cost against SLA goodput (hollow: carries less than the offered load; square: scaled)",
                 fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    slide = {t: [(t.xy[0] * f, t.xy[1] * f) for f in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4)] for t in iso}
    spread_labels(fig, [*sorted(labels, key=lambda t: -t.xy[1]), *iso], along=slide)
    return fig
