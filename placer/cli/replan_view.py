"""What ``placer simulate --replan-every`` prints: the four fleets side by side, the changes, a figure.

in:  the day's JSON (:func:`placer.replan.summary.day_json`); the face of :mod:`placer.cli.sim`
out: Rich tables; a PNG of the day (rate, chips up per role for the replanned and oracle fleets,
     each fleet's attainment per window) — matplotlib imported inside :func:`write_figure`
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def day_view(data: dict[str, Any]) -> Group:
    head = Table(title=f"{data['scenario']}: a day of {data['day_s'] / 3600:g} h, replanned every "
                 f"{data['replan_every_s']:g} s (fit window {data['window_s']:g} s), peak/trough "
                 f"{_f(data['peak_to_trough'], '.2f')}")
    for col in ("fleet", "SLA attainment", "TTFT P90 s", "TTFT P99 s", "goodput req/s", "cost USD", "BCR req/USD", "changes",
                "chips moved", "dip min", "chips lost", "overloaded windows"):
        head.add_column(col, justify="left" if col == "fleet" else "right")
    for name, f in data["fleets"].items():
        head.add_row(name, _f(f["sla_attainment"], ".3f"), _f(f["ttft_p90_s"], ".3f"),
                     _f(f["ttft_p99_s"], ".3f"), _f(f["goodput_rps"], ".3f"),
                     _f(f["cost_usd"], ",.0f"), _f(f["bcr_requests_per_usd"], ".1f"), str(f["changes"]),
                     str(f["chips_moved"]), _f(f["dip_minutes"], ".1f"), str(f.get("chips_lost", 0)),
                     str(f["overloaded_windows"]))
    wins = Table(title="per window: attainment / TTFT P99 s / USD (! a simulated queue grows: worse over the whole "
                 "window)")
    wins.add_column("window")
    wins.add_column("req/s", justify="right")
    for name in data["fleets"]:
        wins.add_column(name, justify="right")
    for w in data["windows"]:
        wins.add_row(f"{w['start_s'] / 3600:5.2f} h", _f(w["rate_rps"], ".2f"),
                     *(f"{'!' if v['overloaded'] else ''}{_f(v['sla_attainment'], '.3f')} / "
                       f"{_f(v['ttft_p99_s'], '.2f')} / {_f(v['cost_usd'], ',.0f')}"
                       for v in w["fleets"].values()))
    t = data["timing_s"]
    timing = f"wall time: {t['total']:g} s (solves {t['solve']:g} s, simulation {t['simulate']:g} s)"
    inventory = "".join(f"inventory: {c['datacenter']} holds {c['chips']} {c['chip']} from {c['hour']:g} h on "
                        "(a fleet over it loses instances at once: chips lost)\n"
                        for c in data.get("inventory_changes", []))
    return Group(head, wins, inventory + startup_lines(data["startup"]), timing)


def startup_lines(s: dict[str, Any]) -> str:
    """Where the start-up and drain figures come from, each starting instance's start-up, and — measured —
    the executor's own start-up and drain predicted against measured."""
    lines = []
    if s.get("startup_s") is not None:
        lines.append(f"start-up: every instance {s['startup_s']:g} s (--startup); drain {s['drain_s']:g} s")
    else:
        m = s.get("measured")
        src = (f"the executor measured on {m.get('host', '?')} {m.get('measured_at', '')} ({m.get('file')})" if m
               else "published cold starts (placer/replan/README.md)")
        lines.append(f"start-up: weights / ({s['load_gbyte_per_s_per_chip']:g} GB/s × chips) + {s['warmup_s']:g} s "
                     f"warm-up, drain {s['drain_s']:g} s — from {src}")
        if m and m.get("exam") and m.get("drain"):
            e, d = m["exam"], m["drain"]
            lines.append(f"  executor, {e['bytes'] / 1e6:.0f} MB checkpoint: start-up predicted "
                         f"{e['predicted_startup_s']:.2f} s, measured {e['startup_s']:.2f} s "
                         f"({_pct(e['predicted_startup_s'], e['startup_s'])}); drain predicted {d['predicted_s']:.2f} s, "
                         f"measured {d['measured_s']:.2f} s ({_pct(d['predicted_s'], d['measured_s'])})")
    inst = s.get("instance_s") or {}
    if inst:
        lines.append("  an instance of PLAN.json starts in: " + ", ".join(f"{k} {_f(v, '.0f')} s" for k, v in inst.items()))
    return "\n".join(lines)


def _pct(pred: float, meas: float) -> str:
    return f"error {100 * (pred - meas) / meas:+.0f} %" if meas else "error —"


def write_figure(data: dict[str, Any], path: Path) -> None:
    """The day in one PNG: offered rate, chips up per role (replanned, oracle), attainment per fleet."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wins = data["windows"]
    hours = [w["start_s"] / 3600 for w in wins] + [(wins[-1]["start_s"] + wins[-1]["length_s"]) / 3600]

    def steps(values: list) -> list:
        return values + values[-1:]  # the last window drawn to its end

    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    ax1.step(hours, steps([w["rate_rps"] for w in wins]), where="post")
    ax1.set_ylabel("offered req/s")
    for fleet, style in (("replanned", "-"), ("oracle", ":")):
        roles = sorted({r for w in wins for r in w["fleets"][fleet]["chips_by_role"]})
        for role in roles:
            ax2.step(hours, steps([w["fleets"][fleet]["chips_by_role"].get(role, 0) for w in wins]),
                     where="post", linestyle=style, label=f"{fleet} {role}")
    ax2.set_ylabel("chips up (end of window)")
    ax2.legend(fontsize="small", ncol=2)
    for fleet in data["fleets"]:
        ax3.step(hours, steps([w["fleets"][fleet]["sla_attainment"] for w in wins]), where="post", label=fleet)
    ax3.set_ylabel("SLA attainment")
    ax3.set_xlabel("hour of the day")
    ax3.legend(fontsize="small")
    fig.suptitle(f"{data['scenario']}: replanned every {data['replan_every_s']:g} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
