"""Choosing the cadence: the day of :func:`placer.replan.loop.run_day` at several replanning
cadences or hysteresis thresholds (``placer sweep --vary replan-every|hysteresis``).

in:  scenario, timeline, starting plan, start-up costs, what varies (``replan-every``: seconds;
     ``hysteresis``: min BCR gain %) and its values
out: one row per value: the replanned fleet's attainment, TTFT P90, USD, BCR, changes, chips moved,
     and the static, peak and oracle fleets' attainment and BCR beside it; a CSV; a PNG

Sequential (each day is tens of MILP solves); no Ray.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

from placer.plan import Plan
from placer.replan.adoption import AdoptionRule
from placer.replan.fleets import Startup
from placer.replan.loop import FLEETS, DayConfig, run_day
from placer.replan.timeline import Timeline
from placer.specs import Scenario

REPLAN_VARY = ("replan-every", "hysteresis")
COLUMNS = ("value", "replanned_sla_attainment", "replanned_ttft_p90_s", "replanned_cost_usd",
           "replanned_bcr_requests_per_usd", "changes", "chips_moved", "dip_minutes",
           *(f"{f}_{k}" for f in FLEETS if f != "replanned" for k in ("sla_attainment", "bcr_requests_per_usd")))


def sweep_replanning(scenario: Scenario, timeline: Timeline, start: Plan, rule: AdoptionRule, startup: Startup,
                     config: DayConfig, vary: str, values: list[float]) -> list[dict]:
    rows = []
    for value in values:
        if vary == "replan-every":
            day = run_day(scenario, timeline, start, rule, startup, replace(config, replan_every_s=value))
        else:
            day = run_day(scenario, timeline, start, replace(rule, min_bcr_gain_pct=value), startup, config)
        f = day.data["fleets"]
        r = f["replanned"]
        row = {"value": value, "replanned_sla_attainment": r["sla_attainment"],
               "replanned_ttft_p90_s": r["ttft_p90_s"], "replanned_cost_usd": r["cost_usd"],
               "replanned_bcr_requests_per_usd": r["bcr_requests_per_usd"], "changes": r["changes"],
               "chips_moved": r["chips_moved"], "dip_minutes": r["dip_minutes"]}
        for name in FLEETS:
            if name != "replanned":
                row[f"{name}_sla_attainment"] = f[name]["sla_attainment"]
                row[f"{name}_bcr_requests_per_usd"] = f[name]["bcr_requests_per_usd"]
        rows.append(row)
    return rows


def write_replan_outputs(rows: list[dict], out_dir: Path, vary: str, title: str) -> tuple[Path, Path]:
    """sweep.csv and sweep.png (BCR and attainment of each fleet against the varied value)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = out_dir / "sweep.csv", out_dir / "sweep.png"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    xs = [r["value"] / (3600 if vary == "replan-every" else 1) for r in rows]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for name in FLEETS:
        a1.plot(xs, [r[f"{name}_bcr_requests_per_usd"] for r in rows], marker="o", label=name)
        a2.plot(xs, [r[f"{name}_sla_attainment"] for r in rows], marker="o", label=name)
    a1.set_ylabel("BCR (good req/USD)")
    a2.set_ylabel("SLA attainment")
    a2.set_xlabel("replanning every (h)" if vary == "replan-every" else "hysteresis (min BCR gain %)")
    a1.legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return csv_path, png_path
