"""The day's figures per fleet and per window, and the JSON of ``placer simulate --replan-every``.

in:  each window's simulated stretches (offered requests, goodput fraction, TTFT P50/P90/P99) and USD
out: per fleet the day's SLA attainment (good requests / offered), TTFT P90 and P99 over the day, goodput,
     USD, BCR (good requests per USD), plan changes, chips moved, capacity-dip minutes; per window
     the same with the chips up per role

The day's TTFT P90 (P99) is the 0.9- (0.99-) quantile of the mixture of the stretches' TTFT laws, each law
piecewise linear through its (P50, P90, P99) — an approximation: the simulator reports quantiles,
not its whole sketch. A stretch with no pools able to serve counts its requests as never served.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

_LEVELS = (0.0, 0.5, 0.9, 0.99, 1.0)


def _cdf(x: float, p50: float, p90: float, p99: float) -> float:
    if not math.isfinite(p99):
        return 0.0
    xs = (0.0, p50, p90, p99, p99 + max(p99 - p90, 1e-9))
    if x >= xs[-1]:
        return 1.0
    for i in range(1, len(xs)):
        if x < xs[i]:
            span = xs[i] - xs[i - 1]
            return _LEVELS[i - 1] + (_LEVELS[i] - _LEVELS[i - 1]) * ((x - xs[i - 1]) / span if span > 0 else 1.0)
    return 1.0


def mixture_quantile(parts: list[tuple[float, float, float, float]], q: float = 0.9) -> float:
    """The ``q``-quantile of a mixture of (weight, p50, p90, p99) laws (inf when beyond every finite one)."""
    total = sum(w for w, *_ in parts)
    finite = [p for p in parts if math.isfinite(p[3])]
    if total <= 0 or not finite:
        return math.inf
    hi = max(p[3] + max(p[3] - p[2], 1e-9) for p in finite)
    if sum(w * _cdf(hi, *rest) for w, *rest in parts) / total < q:
        return math.inf
    lo = 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(w * _cdf(mid, *rest) for w, *rest in parts) / total >= q:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass
class FleetTally:
    name: str
    windows: list[dict] = field(default_factory=list)
    parts: list[tuple[float, float, float, float]] = field(default_factory=list)

    def add_window(self, window, usd: float, fleet) -> None:
        by_role: dict[str, int] = {}
        for row in fleet.serving.values():
            by_role[row.role] = by_role.get(row.role, 0) + row.count * int(row.tp)
        self.windows.append({"index": window.index, "offered": window.requests, "good": 0.0, "cost_usd": usd,
                             "parts": [], "chips_by_role": by_role, "overloaded": False, "backlog": 0.0})

    def add_segment(self, index: int, offered: float, good_fraction: float, p50: float, p90: float,
                    p99: float, overloaded: bool = False) -> None:
        w = self.windows[-1]
        w["overloaded"] = w["overloaded"] or overloaded
        w["good"] += offered * good_fraction
        w["parts"].append((offered, p50, p90, p99))
        self.parts.append((offered, p50, p90, p99))

    def window_figures(self, i: int) -> dict[str, Any]:
        w = self.windows[i]
        return {"sla_attainment": _r(w["good"] / w["offered"] if w["offered"] else 0.0),
                "ttft_p90_s": _r(mixture_quantile(w["parts"])),
                "ttft_p99_s": _r(mixture_quantile(w["parts"], 0.99)), "cost_usd": _r(w["cost_usd"]),
                "chips_by_role": w["chips_by_role"], "overloaded": w["overloaded"],
                "backlog_requests": _r(w["backlog"])}

    def day_figures(self, day_s: float) -> dict[str, Any]:
        offered = sum(w["offered"] for w in self.windows)
        good = sum(w["good"] for w in self.windows)
        usd = sum(w["cost_usd"] for w in self.windows)
        return {"sla_attainment": _r(good / offered if offered else 0.0),
                "ttft_p90_s": _r(mixture_quantile(self.parts)), "ttft_p99_s": _r(mixture_quantile(self.parts, 0.99)),
                "goodput_rps": _r(good / day_s),
                "cost_usd": _r(usd), "bcr_requests_per_usd": _r(good / usd if usd > 0 else 0.0),
                "overloaded_windows": sum(1 for w in self.windows if w["overloaded"]),
                "backlog_end_requests": _r(self.windows[-1]["backlog"]) if self.windows else 0.0}


def _r(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


def _measured(raw: dict | None) -> dict | None:
    """The executor's measured start-up and drain (bench/bench_startup.py) behind the figures: where, when,
    and its predicted vs measured exam."""
    if raw is None:
        return None
    keep = ("file", "source", "measured_at", "host", "model", "tiny", "exam", "drain")
    return {k: raw[k] for k in keep if k in raw}


def day_json(scenario, wins, fleets, tallies, decisions, config, startup, rule) -> dict[str, Any]:
    day_s = sum(w.length_s for w in wins)
    rates = [w.rate_rps for w in wins]
    out_fleets = {}
    for name, tally in tallies.items():
        f = fleets[name]
        out_fleets[name] = {**tally.day_figures(day_s), "changes": f.changes, "chips_moved": f.chips_moved,
                            "dip_minutes": _r(f.dip_s / 60),
                            "break_before_make": f.breaks, "chips_lost": f.chips_lost}
    return {
        "scenario": scenario.name,
        "day_s": day_s,
        "replan_every_s": config.replan_every_s,
        "window_s": config.window_s or config.replan_every_s,
        "peak_to_trough": _r(max(rates) / min(rates)),
        "startup": {"strategy": startup.strategy, "load_gbyte_per_s_per_chip": startup.load_gbyte_per_s_per_chip,
                    "warmup_s": startup.warmup_s, "drain_s": startup.drain_s, "startup_s": startup.startup_s,
                    "measured": _measured(startup.measured_from)},
        "hysteresis": {"min_bcr_gain_pct": rule.min_bcr_gain_pct, "cooldown_s": rule.cooldown_s,
                       "max_pool_changes": rule.max_pool_changes},
        "simulation": "window by window: each stretch with one set of pools up simulated from empty at the "
                      f"window's rate, at most {config.requests_per_window} requests each; "
                      + ("the queue a stretch leaves carried into the next (a fluid backlog at the fleet's "
                         "capacity: arrivals waiting past the TTFT SLA behind it are not good)"
                         if getattr(config, "carry_queues", True) else "nothing carried across windows"),
        "fleets": out_fleets,
        "changes": [{k: (_r(v) if isinstance(v, float) else v) for k, v in d.items()} for d in decisions],
        "windows": [{"index": w.index, "start_s": w.start_s, "length_s": w.length_s, "rate_rps": _r(w.rate_rps),
                     "fleets": {name: tallies[name].window_figures(i) for name in tallies}}
                    for i, w in enumerate(wins)],
    }
