"""Plan → rows of display strings, shared by the HTML report and the dashboard.

in:  a :class:`~placer.plan.Plan` (and optionally a Simulation JSON or a comparison)
out: lists of plain dicts / tuples of strings; no HTML here (the templates escape).
"""

from __future__ import annotations

from placer.plan import Plan
from placer.report.diagram import ROLE_ORDER

PDD_BEST = "pdd, best BCR"  #: baseline_rows' row of PDD at its best BCR within the inventory


def _f(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def _sim_value(sim: dict, key: str, fmt) -> str:
    """``sim[key]`` formatted, or "" when the simulation does not report it."""
    return fmt(sim[key]) if key in sim else ""


def metric_rows(plan: Plan, sim: dict | None = None) -> list[tuple[str, str, str]]:
    """(metric, planned by the ILP, simulated or "") rows."""
    m = plan.metrics
    s = sim or {}
    return [
        ("BCR (SLA requests per USD)", _f(m.bcr_requests_per_usd, 2),
         _sim_value(s, "bcr_requests_per_usd", lambda v: _f(v, 2))),
        ("cost (USD/h)", _f(m.cost_usd_per_h, 2), _sim_value(s, "cost_usd_per_h", lambda v: _f(v, 2))),
        ("SLA goodput (req/s)", _f(m.goodput_rps), _sim_value(s, "goodput_rps", _f)),
        ("served / offered (req/s)", f"{_f(m.served_rps)} / {_f(m.offered_rps)}",
         f"{_f(s['served_rps'])} / {_f(s['offered_rps'])}" if "served_rps" in s else ""),
        ("SLA attainment", f"{100 * m.sla_attainment:.1f} %",
         _sim_value(s, "sla_attainment", lambda v: f"{100 * v:.1f} %")),
        ("TTFT P50 / P90 / P99 (s)", f"{_f(m.ttft_p50_s)} / {_f(m.ttft_p90_s)} / {_f(m.ttft_p99_s)}",
         f"{_f(s['ttft_p50_s'])} / {_f(s['ttft_p90_s'])} / {_f(s['ttft_p99_s'])}" if "ttft_p50_s" in s else ""),
        ("TPOT (s)", _f(m.tpot_s, 4), f"P50 {_f(s['tpot_p50_s'], 4)}, P90 {_f(s['tpot_p90_s'], 4)}"
         if "tpot_p50_s" in s else ""),
        ("WAN, busiest direction", busiest_line(plan), _sim_busiest(s) if "links" in s else ""),
        ("RLD share of output tokens", f"{100 * m.rld_token_share:.1f} %",
         _sim_value(s, "rld_token_share", lambda v: f"{100 * v:.1f} %")),
    ]


def _sim_busiest(sim: dict) -> str:
    """The simulated mean Gbit/s of the busiest direction of any line, against its capacity."""
    used = [l for l in sim.get("links", []) if l.get("mean_gbit_per_s", 0.0) > 0]
    if not used:
        return "none"
    top = max(used, key=lambda l: l["mean_gbit_per_s"] / l["gbit_per_s_capacity"] if l.get("gbit_per_s_capacity")
              else 0.0)
    return f"{top['mean_gbit_per_s']:.2f} of {top['gbit_per_s_capacity']:g} Gbit/s {top['src']}->{top['dst']} (mean)"


def solver_line(plan: Plan) -> str:
    so = plan.solver
    return f"{so.backend} {so.status}, MIP gap {100 * so.mip_gap:.2f} %, {so.seconds:.2f} s"


def pool_rows(plan: Plan, usage: list | None = None) -> list[dict]:
    """Pools with instances; with ``usage`` (:func:`placer.pool_usage.pool_usage`) their
    utilisation and KV GiB used / capacity per instance ("" without). ``tp`` is the instance
    shape's label (``8``, ``8-dep``, ``16-pp2``), so two shapes of the same chips never look alike."""
    by_key = {u.key: u for u in usage or []}
    pools = sorted(plan.pools, key=lambda p: (p.datacenter, ROLE_ORDER.index(p.role), p.chip, p.tp))
    rows = []
    for p in pools:
        if p.count <= 0:
            continue
        u = by_key.get(p.key)
        rows.append({"role": p.role, "datacenter": p.datacenter, "chip": p.chip, "tp": f"{p.tp}", "count": p.count,
                     "chips": p.count * p.tp, "utilisation": f"{100 * u.utilization:.0f} %" if u else "",
                     "kv": f"{u.kv_gib_used:.0f} / {u.kv_gib_capacity:.0f}" if u else ""})
    return rows


def route_rows(plan: Plan) -> list[dict]:
    return [{"request_class": r.request_class, "pipeline": r.pipeline, "src": r.src, "dst": r.dst,
             "rps": _f(r.rps, 4)} for r in plan.routes]


def link_rows(plan: Plan) -> list[dict]:
    return [{"src": l.src, "dst": l.dst, "used": _f(l.gbit_per_s_used, 2), "capacity": f"{l.gbit_per_s_capacity:g}",
             "utilisation": f"{100 * l.gbit_per_s_used / l.gbit_per_s_capacity:.1f} %"
             if l.gbit_per_s_capacity > 0 else "-"} for l in plan.links]


def binding_rows(plan: Plan) -> list[dict]:
    """Binding constraints with what one more unit buys (``marginal``) and, when the
    planner priced it, the BCR change in req/USD."""
    rows = []
    for b in plan.binding:
        extra = b.model_extra or {}
        delta = extra.get("delta_bcr_requests_per_usd")
        rows.append({"constraint": b.constraint, "marginal": b.marginal,
                     "delta": f"{delta:+.3f}" if isinstance(delta, (int, float)) else ""})
    return rows


def busiest_line(plan: Plan) -> str:
    """The most used direction of any WAN line, ``"21.25 of 25 Gbit/s dc-a->dc-b"`` (one
    direction against that direction's capacity; never two directions summed), or "none"."""
    used = [l for l in plan.links if l.gbit_per_s_used > 0]
    if not used:
        return "none"
    top = max(used, key=lambda l: l.gbit_per_s_used / l.gbit_per_s_capacity if l.gbit_per_s_capacity else 0.0)
    return f"{top.gbit_per_s_used:.2f} of {top.gbit_per_s_capacity:g} Gbit/s {top.src}->{top.dst}"


def served_text(plan: Plan) -> str:
    m = plan.metrics
    return f"{m.served_rps:.2f} / {m.offered_rps:g}"


def _ratio(num: float, den: float) -> str:
    return f"{num / den:.2f}" if den > 0 and num > 0 else "n/a"


def verdict(plan: Plan) -> str:
    """One line on how a baseline's row is to be read (placer.baselines's ``baseline`` object):
    scaled and with which chips, the same as another, cannot carry, cannot meet the SLA,
    or the share of the load it carries; "" for a plan that carries the load within the SLA."""
    info = (plan.model_extra or {}).get("baseline") or {}
    parts = [info[k] for k in ("same_as", "scaled", "cannot_carry", "verdict", "threshold") if info.get(k)]
    m = plan.metrics
    if not info.get("scaled") and m.offered_rps > 0 and m.served_rps < 0.999 * m.offered_rps:
        most = info.get("max_within_inventory_rps")
        at_most = (f"; at most {most:.2f} req/s within the SLA on this inventory"
                   if isinstance(most, (int, float)) and most > m.served_rps + 0.005 else "")
        parts.insert(0, f"carries {m.served_rps:.2f} of the {m.offered_rps:g} req/s offered "
                        f"({100 * m.served_rps / m.offered_rps:.0f} %){at_most}")
    return "; ".join(parts)


def rules(plan) -> str:
    """A baseline's rules in one line (``baseline.rules``; an error row's ``rules``), or ""."""
    if isinstance(plan, Plan):
        return str(baseline_info(plan).get("rules", ""))
    return str((plan or {}).get("rules", ""))


def compared(comparison: dict) -> list[tuple[str, object]]:
    """(name, plan or {"error"}) of a ``compare`` result in display order: PDD, then each
    baseline followed by its equal-load twin ``"<name>, scaled"`` when it has one."""
    out: list[tuple[str, object]] = [("pdd", comparison["pdd"])]
    scaled = comparison.get("scaled", {})
    for name, plan in comparison["baselines"].items():
        out.append((name, plan))
        if name in scaled:
            out.append((f"{name}, scaled", scaled[name]))
    return out


def baseline_rows(comparison: dict, simulated: dict[str, dict] | None = None) -> list[dict]:
    """One row per plan in a ``compare`` result (PDD first, then PDD at its best BCR within the
    inventory when the result has it, :data:`PDD_BEST`): served / offered, the figures,
    the busiest WAN direction, PDD's ratios ("n/a" where a ratio has no meaning, never nan)
    and how to read the row (:func:`verdict`), or why a baseline has no plan.

    ``simulated``: plan name → its Simulation JSON; adds ``sim_p90``, the simulated TTFT P90
    (the figure the report's CDF legend shows), beside the planned ``ttft_p90``."""
    simulated = simulated or {}
    pdd: Plan = comparison["pdd"]
    rows = []
    entries = compared(comparison)
    best = comparison.get("pdd_best_within_inventory")
    if isinstance(best, Plan) and not same_point(pdd, best):
        entries.insert(1, (PDD_BEST, best))
    for name, plan in entries:
        if not isinstance(plan, Plan):
            rows.append({"name": name, "error": plan.get("error", "no plan"), "rules": rules(plan),
                         "not_applicable": bool(plan.get("not_applicable"))})
            continue
        m = plan.metrics
        rows.append({"name": name, "served": served_text(plan), "bcr": _f(m.bcr_requests_per_usd, 2),
                     "cost": _f(m.cost_usd_per_h, 2), "goodput": _f(m.goodput_rps), "ttft_p90": _f(m.ttft_p90_s),
                     "wan": busiest_line(plan), "chips": sum(p.count * p.tp for p in plan.pools),
                     "bcr_x": _ratio(pdd.metrics.bcr_requests_per_usd, m.bcr_requests_per_usd),
                     "p90_x": _ratio(pdd.metrics.ttft_p90_s, m.ttft_p90_s),
                     "sim_p90": _f(simulated[name]["ttft_p90_s"]) if name in simulated else "",
                     "note": _with_rules(plan, name), "rules": rules(plan) if name != "pdd" else "",
                     "verdict": verdict(plan) if name != "pdd" else ""})
        if name == PDD_BEST:
            share = f"{100 * m.served_rps / m.offered_rps:.0f} %" if m.offered_rps > 0 else "n/a"
            said = (f"PDD at its best BCR within the inventory, carrying {share} of the load: it may leave load, "
                    "as a baseline shown at partial load does")
            rows[-1].update(bcr_x="-", p90_x="-", note=said, verdict=said)
    return rows


def _with_rules(plan: Plan, name: str) -> str:
    """The report's "how to read it": the baseline's rules (not repeated on its scaled twin), then its verdict."""
    if name in ("pdd", PDD_BEST):
        return ""
    first = "" if name.endswith(", scaled") else rules(plan)
    return "; ".join(part for part in (f"rules: {first}" if first else "", verdict(plan)) if part)


def baseline_info(plan) -> dict:
    """A plan's ``baseline`` object (placer.baselines), {} for PDD or a plan without one."""
    return ((plan.model_extra or {}).get("baseline") or {}) if isinstance(plan, Plan) else {}


def same_point(a: Plan, b: Plan) -> bool:
    x, y = a.metrics, b.metrics
    return abs(x.served_rps - y.served_rps) < 0.005 and abs(x.bcr_requests_per_usd - y.bcr_requests_per_usd) < 0.05
