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
        return str(_info(plan).get("rules", ""))
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
    if isinstance(best, Plan) and not _same_point(pdd, best):
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


def headline(comparison: dict) -> str:
    """Two lines, then the hints. First, what each side carries **within the scenario's
    inventory** (:func:`inventory_line`): PDD, the strongest baseline on that inventory (one
    that carries the whole load preferred, then the best BCR), and the equal-load reference
    when it is another. Then the comparison at equal load (:func:`equal_load_line`): against
    the best baseline carrying the whole load within the inventory, and against the best
    scaled one when it is ahead, with the chips it bought beyond the inventory at catalog
    prices (``baseline.beyond_inventory``). A baseline marked the same as another
    (``same_as``) is a reference only when nothing else is. When a baseline is shown at partial
    load, the first line holds PDD under the same rule too (``pdd_best_within_inventory``) and
    PDD's BCR against each baseline both ways, the partial baseline with the best BCR among them."""
    pdd: Plan = comparison["pdd"]
    plans = [(n, p) for n, p in compared(comparison)[1:]
             if isinstance(p, Plan) and p.metrics.bcr_requests_per_usd > 0]
    if not plans:
        return "no baseline meets the SLA for any request: no BCR to compare against"
    plans = [(n, p) for n, p in plans if not _info(p).get("same_as")] or plans
    within = [(n, p) for n, p in plans if not n.endswith(", scaled")]
    full = [(n, p) for n, p in plans if _full(p)]
    ref = max(full or plans, key=lambda np: np[1].metrics.bcr_requests_per_usd)
    strongest = max(within, key=lambda np: (_full(np[1]) and np[1].metrics.sla_attainment >= 0.9,
                                            np[1].metrics.bcr_requests_per_usd)) if within else None
    shown = [strongest] if strongest else []
    base = ref[0].split(",")[0]
    if not strongest or base != strongest[0]:
        shown.append((base, comparison["baselines"].get(base)))
    partial = [(n, p) for n, p in within if not _full(p)]
    if isinstance(comparison.get("pdd_best_within_inventory"), Plan) and partial:
        # like with like: the best partial baseline beside PDD at its best BCR
        top = max(partial, key=lambda np: np[1].metrics.bcr_requests_per_usd)
        if top[0] not in [n for n, _ in shown]:
            shown.append(top)
    lines = [inventory_line(pdd, shown, comparison.get("pdd_best_within_inventory")),
             equal_load_line(pdd, full, plans)]
    return "\n".join([*lines, *(f"hint: {h}" for h in hints(comparison))])


def _full(plan: Plan) -> bool:
    return plan.metrics.served_rps >= 0.999 * plan.metrics.offered_rps


def _info(plan) -> dict:
    """A plan's ``baseline`` object (placer.baselines), {} for PDD or a plan without one."""
    return ((plan.model_extra or {}).get("baseline") or {}) if isinstance(plan, Plan) else {}


def _bcr(plan: Plan) -> str:
    return f"BCR {plan.metrics.bcr_requests_per_usd:.1f}"


def inventory_line(pdd: Plan, baselines: list[tuple[str, object]], best: object = None) -> str:
    """``within the inventory: PDD serves 10.00 / 10 req/s at BCR 187.3; same-dc-pd serves
    4.96 / 10 req/s at BCR 202.7 (at most 5.30 req/s within the SLA, at a lower BCR)``; a plan
    that meets the TTFT P90 SLA for fewer than 90 % of its requests says so.

    ``best``: PDD at its best BCR within the inventory, free to leave load as a partial baseline is
    (``pdd_best_within_inventory``): PDD is given both ways (``…, or 7.38 / 10 req/s at BCR 211.2 at
    its best BCR``), and so is its BCR against each baseline (``PDD -7.6 % at the whole load, +4.2 %
    at its best BCR``) — like with like."""
    at_best = f" (at its best BCR: no plan, {best['error']})" if isinstance(best, dict) and best.get("error") else ""
    best = best if isinstance(best, Plan) else None
    if best is not None:
        solve = (best.model_extra or {}).get("best_within_inventory") or {}
        if not _same_point(pdd, best):
            at_best = (f", or {served_text(best)} req/s at {_bcr(best)}{_late(best)} at its best BCR "
                       f"(leaving load, as a partial baseline does)")
        elif solve.get("status", "optimal") == "optimal":
            at_best = " (also its best BCR when it may leave load, as a partial baseline does)"
        else:  # the solve leaving load stopped on its time limit: a higher BCR may exist
            at_best = (f" (leaving load, its solve found no higher BCR before its time limit: "
                       f"{solve['status']}, {100 * solve.get('mip_gap', 0.0):.1f} % gap; raise --time-limit)")
    parts = [f"within the inventory: PDD serves {served_text(pdd)} req/s at {_bcr(pdd)}{_late(pdd)}{at_best}"]
    for name, within in baselines:
        if not isinstance(within, Plan):
            parts.append(f"{name} has no plan ({(within or {}).get('error', 'not solved')})")
            continue
        most = _info(within).get("max_within_inventory_rps")
        served = within.metrics.served_rps
        more = ""
        if isinstance(most, (int, float)) and most > served + 0.005:
            more = f" (at most {most:.2f} req/s within the SLA, at a lower BCR)"
        elif most == 0:
            more = " (no load within the SLA)"
        parts.append(f"{name} serves {served_text(within)} req/s at {_bcr(within)}{_late(within)}{more}"
                     f"{_both_ways(pdd, best, within)}")
    return "; ".join(parts)


def _same_point(a: Plan, b: Plan) -> bool:
    x, y = a.metrics, b.metrics
    return abs(x.served_rps - y.served_rps) < 0.005 and abs(x.bcr_requests_per_usd - y.bcr_requests_per_usd) < 0.05


def _pct(mine: Plan, theirs: Plan) -> str:
    them = theirs.metrics.bcr_requests_per_usd
    return f"{100 * (mine.metrics.bcr_requests_per_usd / them - 1):+.1f} %" if them > 0 else "n/a"


def _both_ways(pdd: Plan, best: Plan | None, within: Plan) -> str:
    """``: PDD -7.6 % at the whole load, +4.2 % at its best BCR`` (BCR against ``within``), "" without ``best``."""
    if best is None:
        return ""
    if _same_point(pdd, best):
        return f": PDD {_pct(pdd, within)}"
    return f": PDD {_pct(pdd, within)} at the whole load, {_pct(best, within)} at its best BCR"


def _late(plan: Plan) -> str:
    """`` (58 % within the SLA)`` for a plan that misses the TTFT P90 SLA, else ""."""
    m = plan.metrics
    return f" ({100 * m.sla_attainment:.0f} % within the SLA)" if m.served_rps > 0 and m.sla_attainment < 0.9 else ""


def equal_load_line(pdd: Plan, full: list[tuple[str, Plan]], plans: list[tuple[str, Plan]]) -> str:
    """PDD's BCR at equal load against the best baseline that carries the whole load within the
    inventory, and against the best scaled one when that is ahead, with what it bought."""
    mine = pdd.metrics.bcr_requests_per_usd

    def pct(plan: Plan) -> str:
        return f"BCR {100 * (mine / plan.metrics.bcr_requests_per_usd - 1):+.1f} %"

    if not full:
        name, best = max(plans, key=lambda np: np[1].metrics.bcr_requests_per_usd)
        return (f"at unequal load (no baseline carries the whole load): {pct(best)} against {name}, "
                f"which serves {served_text(best)} req/s")
    inside = [(n, p) for n, p in full if not _bought(p)]
    bought = [(n, p) for n, p in full if _bought(p)]
    parts = []
    top_inside = max(inside, key=lambda np: np[1].metrics.bcr_requests_per_usd) if inside else None
    if top_inside:
        parts.append(f"{pct(top_inside[1])} against {top_inside[0]}, both within the inventory")
    top_bought = max(bought, key=lambda np: np[1].metrics.bcr_requests_per_usd) if bought else None
    if top_bought and (not top_inside or top_bought[1].metrics.bcr_requests_per_usd
                       > top_inside[1].metrics.bcr_requests_per_usd):
        parts.append(f"{pct(top_bought[1])} against {top_bought[0]}, only by buying {_what(top_bought[1])}; "
                     f"PDD stays within the inventory")
    return f"at equal load ({pdd.metrics.offered_rps:g} req/s): " + "; ".join(parts)


def _bought(plan: Plan) -> bool:
    info = _info(plan)
    return bool(info.get("scaled") or info.get("beyond_inventory"))


def _what(plan: Plan) -> str:
    """``64 Ascend-910B beyond dc-a's 96 (+64.00 USD/h at catalog prices)``."""
    info = _info(plan)
    bought = info.get("beyond_inventory")
    if bought:
        what = ", ".join(f"{b['chips']} {b['chip']} beyond {b['datacenter']}'s {b['inventory']}" for b in bought)
        return f"{what} (+{info.get('beyond_inventory_usd_per_h', 0.0):.2f} USD/h at catalog prices)"
    # a plan JSON from before beyond_inventory: the scaled note says what it took
    return "chips beyond the inventory: " + str(info["scaled"]).split("it took ", 1)[-1].split(" (chips")[0]


#: A baseline ahead of PDD by less than this fraction of its BCR gets no hint (solver noise).
HINT_MARGIN = 0.005


def hints(comparison: dict) -> list[str]:
    """What to change when a baseline beats the PDD plan, one line per baseline (the variant
    that carries the whole load preferred): the option that lets the planner use what the
    baseline uses (``agg``: ``options.aggregated``), the chips it needed beyond the inventory,
    the load it left unserved (``options.min_served_fraction``), or the PDD solve's gap."""
    pdd: Plan = comparison["pdd"]
    mine = pdd.metrics.bcr_requests_per_usd
    best: dict[str, tuple[str, Plan]] = {}
    for name, plan in compared(comparison)[1:]:
        if not isinstance(plan, Plan) or plan.metrics.bcr_requests_per_usd <= mine * (1 + HINT_MARGIN):
            continue
        if ((plan.model_extra or {}).get("baseline") or {}).get("same_as"):
            continue  # its twin speaks for it
        base = name.split(",")[0]
        full = plan.metrics.served_rps >= 0.999 * plan.metrics.offered_rps
        if base not in best or full:
            best[base] = (name, plan)
    return [_hint(name, plan, pdd) for name, plan in best.values()]


def _hint(name: str, plan: Plan, pdd: Plan) -> str:
    m = plan.metrics
    mine = pdd.metrics.bcr_requests_per_usd
    head = (f"{name} beats this plan by {100 * (m.bcr_requests_per_usd / mine - 1):.0f} % BCR" if mine > 0 else
            f"{name} has a BCR of {m.bcr_requests_per_usd:.2f} req/USD where this plan has none")
    info = (plan.model_extra or {}).get("baseline") or {}
    if m.served_rps < 0.999 * m.offered_rps:
        head += f" at a smaller load ({m.served_rps:.2f} of {m.offered_rps:g} req/s)"
    took = str(info["scaled"]).split("it took ", 1)[-1].split(" (chips priced")[0] if info.get("scaled") else ""
    if name.startswith("agg") and not any(p.role == "A" and p.count > 0 for p in pdd.pools):
        return head + (f" (with {took})" if took else "") + (
            ": set options.aggregated: true (docs/scenario.md) so the planner may use aggregated pools too")
    if took:
        return head + f", with more chips than the inventory ({took}): buying them would raise the BCR"
    if m.served_rps < 0.999 * m.offered_rps:
        return head + (": the plan must carry the whole load; set options.min_served_fraction below 1 "
                       "(docs/scenario.md) to leave load that does not pay unserved")
    so = pdd.solver
    if so.status == "optimal" and m.bcr_requests_per_usd > mine * (1 + so.mip_gap + HINT_MARGIN):
        return head + (f" beyond the PDD solve's proven {100 * so.mip_gap:.1f} % gap: its plan lies outside PDD's rules"
                       + (PRFAAS_OUTSIDE if name.startswith("prfaas") else ""))
    return head + (f": the PDD solve ended {so.status} at a {100 * so.mip_gap:.1f} % gap after {so.seconds:.1f} s; "
                   "raise --time-limit")


#: Why a ``prfaas`` plan can lie outside PDD's (issue 45): its set queues against PDD's mix and light ones.
PRFAAS_OUTSIDE = (" (prfaas prefills in one datacenter only the classes on one side of its threshold; a PDD P queue "
                  "takes every class in proportion, or only the light ones, so PDD cannot pose that split)")
