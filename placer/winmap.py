"""Where PDD wins, mapped: PDD/baseline ratios over a knob (or a grid of two), where they cross 1,
and the figure.

in:  the rows of :func:`placer.frontier.run_frontier` (one per grid point and plan)
out: :func:`ratios` — one row per grid point and baseline: PDD's BCR / the baseline's
     (``bcr_ratio``: > 1 where PDD is ahead) and PDD's planned TTFT P90 / the baseline's
     (``p90_ratio``: < 1 where PDD answers sooner), with the share of the offered load each
     carries (a baseline solved within the scenario's inventory may carry less: its BCR is then
     the BCR of what it carries, the ratio says so beside it);
     :func:`crossings` — the break-even contour: for each baseline (and each ``by`` value), the
     knob values where ``bcr_ratio`` crosses 1 between two neighbouring grid points, linearly
     interpolated (a categorical knob such as ``model`` names the two neighbours instead); a
     ratio within :data:`TIE` of 1 (PDD's plan is the baseline's) is no side of a crossing;
     :func:`write_map` — ``map.csv`` and ``map.png``: the BCR ratio (above) and the P90 ratio
     (below) against the knob, one curve per baseline, the line ratio = 1 dashed; over a grid, one
     heat map per baseline with the contour where the ratio is 1.

A grid point where either side has no plan has no ratio (``None``); its reason is in the
frontier rows. matplotlib is imported only by the figure.
"""

from __future__ import annotations

import math
from pathlib import Path

from placer.knobs import LABELS
from placer.sim.sweep import write_csv_and_plot

PDD = "pdd"
#: A ratio within this of 1 is a tie (the same plan solved twice differs in the last digits), never
#: a side of a crossing.
TIE = 0.005
COLUMNS = ("value", "by", "baseline", "bcr_ratio", "p90_ratio", "pdd_bcr", "baseline_bcr", "pdd_ttft_p90_s",
           "baseline_ttft_p90_s", "pdd_served_share", "baseline_served_share", "baseline_status")


def _ok(r: dict | None) -> bool:
    return r is not None and r.get("status") != "no plan" and (r.get("bcr_requests_per_usd") or 0) > 0


def _share(r: dict | None) -> float | None:
    if not _ok(r) or not r.get("offered_rps"):
        return None
    return r["served_rps"] / r["offered_rps"]


def _div(a, b) -> float | None:
    if a is None or b is None or not b or any(isinstance(x, float) and math.isnan(x) for x in (a, b)):
        return None
    return a / b


def ratios(rows: list[dict]) -> list[dict]:
    """PDD/baseline ratios at every grid point (in the rows' order), one row per baseline."""
    points: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        points.setdefault((r["value"], r.get("by")), {})[r["plan"]] = r
    out = []
    for (value, by), plans in points.items():
        pdd = plans.get(PDD)
        for name, base in plans.items():
            if name == PDD:
                continue
            both = _ok(pdd) and _ok(base)
            out.append({
                "value": value, "by": by, "baseline": name,
                "bcr_ratio": _div(pdd["bcr_requests_per_usd"], base["bcr_requests_per_usd"]) if both else None,
                "p90_ratio": _div(pdd.get("ttft_p90_s"), base.get("ttft_p90_s")) if both else None,
                "pdd_bcr": pdd.get("bcr_requests_per_usd") if _ok(pdd) else None,
                "baseline_bcr": base.get("bcr_requests_per_usd") if _ok(base) else None,
                "pdd_ttft_p90_s": pdd.get("ttft_p90_s") if _ok(pdd) else None,
                "baseline_ttft_p90_s": base.get("ttft_p90_s") if _ok(base) else None,
                "pdd_served_share": _share(pdd), "baseline_served_share": _share(base),
                "baseline_status": base.get("status", "")})
    return out


def crossings(ratio_rows: list[dict]) -> list[dict]:
    """Where ``bcr_ratio`` crosses 1 between neighbouring values of the knob, per baseline and
    ``by`` value: ``{"baseline", "by", "at"}`` (``at`` interpolated, numeric knobs) or
    ``{"baseline", "by", "between": (a, b)}`` (a categorical knob), with ``"pdd_ahead_above"``:
    whether PDD is ahead on the side of the larger (later) value."""
    out = []
    series: dict[tuple, list[dict]] = {}
    for r in ratio_rows:
        series.setdefault((r["baseline"], r["by"]), []).append(r)
    for (name, by), pts in series.items():
        pts = [p for p in pts if p["bcr_ratio"] is not None]
        numeric = all(isinstance(p["value"], (int, float)) for p in pts)
        if numeric:
            pts.sort(key=lambda p: p["value"])
        for a, b in zip(pts, pts[1:]):
            ra, rb = a["bcr_ratio"] - 1, b["bcr_ratio"] - 1
            if abs(ra) <= TIE or abs(rb) <= TIE or (ra > 0) == (rb > 0):
                continue
            cross = {"baseline": name, "by": by, "pdd_ahead_above": rb > 0}
            if numeric:
                cross["at"] = a["value"] + (b["value"] - a["value"]) * ra / (ra - rb)
            else:
                cross["between"] = (a["value"], b["value"])
            out.append(cross)
    return out


def crossing_sentence(c: dict, vary: str, by: str | None = None) -> str:
    where = f" at {by} {c['by']:g}" if by and isinstance(c["by"], (int, float)) else \
        f" at {by} {c['by']}" if by else ""
    side = "above" if c["pdd_ahead_above"] else "below"
    if "at" in c:
        return (f"break-even against {c['baseline']}{where}: {vary} ≈ {c['at']:.3g} "
                f"(PDD ahead {side} it)")
    a, b = c["between"]
    return f"break-even against {c['baseline']}{where}: between {vary} {a} and {b} (PDD ahead from {b if c['pdd_ahead_above'] else a})"


def write_map(ratio_rows: list[dict], out_dir: str | Path, vary: str, by: str | None = None,
              title: str = "") -> tuple[Path, Path]:
    """``map.csv`` and ``map.png`` in ``out_dir`` (created)."""
    return write_csv_and_plot(ratio_rows, out_dir, "map", COLUMNS,
                              lambda png: map_figure(ratio_rows, vary, by, title).savefig(png, dpi=110))


def map_figure(ratio_rows: list[dict], vary: str, by: str | None = None, title: str = ""):
    """The map as a matplotlib Figure (no pyplot): curves over one knob, heat maps over two."""
    from matplotlib.figure import Figure

    names = list(dict.fromkeys(r["baseline"] for r in ratio_rows))
    if by is None:
        fig = Figure(figsize=(10, 7))
        ax1, ax2 = fig.subplots(2, 1, sharex=True)
        for i, name in enumerate(names):
            pts = [r for r in ratio_rows if r["baseline"] == name]
            for ax, key in ((ax1, "bcr_ratio"), (ax2, "p90_ratio")):
                xs = [p["value"] for p in pts]
                ys = [math.nan if p[key] is None else p[key] for p in pts]
                ax.plot(xs, ys, marker="o", color=f"C{i}", label=f"PDD / {name}")
        for ax in (ax1, ax2):
            ax.axhline(1.0, color="0.3", ls="--", lw=1)
            ax.grid(alpha=0.3)
        ax1.set_ylabel("BCR ratio PDD / baseline\n(> 1: PDD ahead)")
        ax2.set_ylabel("TTFT P90 ratio PDD / baseline\n(< 1: PDD sooner)")
        ax2.set_xlabel(LABELS.get(vary, vary))
        ax1.legend(fontsize=8)
        fig.suptitle(title or f"where PDD wins: over {vary}")
        fig.tight_layout()
        return fig
    xs = list(dict.fromkeys(r["value"] for r in ratio_rows))
    ys = list(dict.fromkeys(r["by"] for r in ratio_rows))
    fig = Figure(figsize=(5.2 * len(names), 4.6))
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names):
        grid = [[math.nan] * len(xs) for _ in ys]
        for r in ratio_rows:
            if r["baseline"] == name and r["bcr_ratio"] is not None:
                grid[ys.index(r["by"])][xs.index(r["value"])] = r["bcr_ratio"]
        mesh = ax.imshow(grid, origin="lower", aspect="auto", cmap="RdBu", vmin=0.5, vmax=1.5,
                         extent=(-0.5, len(xs) - 0.5, -0.5, len(ys) - 0.5))
        finite = [v for row in grid for v in row if not math.isnan(v)]
        if len(xs) > 1 and len(ys) > 1 and finite and min(finite) < 1 - TIE and max(finite) > 1 + TIE:
            ax.contour(range(len(xs)), range(len(ys)), grid, levels=[1.0], colors="k", linewidths=2)
        for j, row in enumerate(grid):
            for i, v in enumerate(row):
                ax.text(i, j, "–" if math.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(xs)), [format(x, "g") if isinstance(x, (int, float)) else str(x) for x in xs],
                      rotation=30, fontsize=8)
        ax.set_yticks(range(len(ys)), [format(y, "g") if isinstance(y, (int, float)) else str(y) for y in ys],
                      fontsize=8)
        ax.set_xlabel(LABELS.get(vary, vary))
        ax.set_ylabel(LABELS.get(by, by))
        ax.set_title(f"BCR PDD / {name} (black: = 1)", fontsize=9)
        fig.colorbar(mesh, ax=ax, shrink=0.8)
    fig.suptitle(title or f"where PDD wins: {vary} × {by}")
    fig.tight_layout()
    return fig
