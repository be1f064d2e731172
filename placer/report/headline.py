"""A ``compare`` result's headline: what each side carries within the inventory, the comparison at
equal load, and the hints — the first lines the CLI, the API and the report print.

in:  a ``compare`` result (:func:`placer.baselines.compare`: PDD's plan, each baseline's plan or error,
     scaled twins, PDD at its best BCR within the inventory)
out: plain strings (:func:`headline`, :func:`inventory_line`, :func:`equal_load_line`, :func:`hints`)
"""

from __future__ import annotations

from placer.plan import Plan
from placer.report.tables import baseline_info, compared, same_point, served_text


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
    plans = [(n, p) for n, p in plans if not baseline_info(p).get("same_as")] or plans
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
        if not same_point(pdd, best):
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
        most = baseline_info(within).get("max_within_inventory_rps")
        served = within.metrics.served_rps
        more = ""
        if isinstance(most, (int, float)) and most > served + 0.005:
            more = f" (at most {most:.2f} req/s within the SLA, at a lower BCR)"
        elif most == 0:
            more = " (no load within the SLA)"
        parts.append(f"{name} serves {served_text(within)} req/s at {_bcr(within)}{_late(within)}{more}"
                     f"{_both_ways(pdd, best, within)}")
    return "; ".join(parts)


def _pct(mine: Plan, theirs: Plan) -> str:
    them = theirs.metrics.bcr_requests_per_usd
    return f"{100 * (mine.metrics.bcr_requests_per_usd / them - 1):+.1f} %" if them > 0 else "n/a"


def _both_ways(pdd: Plan, best: Plan | None, within: Plan) -> str:
    """``: PDD -7.6 % at the whole load, +4.2 % at its best BCR`` (BCR against ``within``), "" without ``best``."""
    if best is None:
        return ""
    if same_point(pdd, best):
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
    info = baseline_info(plan)
    return bool(info.get("scaled") or info.get("beyond_inventory"))


def _what(plan: Plan) -> str:
    """``64 Ascend-910B beyond dc-a's 96 (+64.00 USD/h at catalog prices)``."""
    info = baseline_info(plan)
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


#: Why a ``prfaas`` plan can lie outside PDD's (issue 45): PDD's P pools split at the highest cuts of the
#: classes' uncached lengths only within the model-size limit, at u·{1, .7, .45} (placer.ilp.p_cuts, p_tiers).
PRFAAS_OUTSIDE = (" (prfaas prefills in one datacenter only the classes on one side of a threshold it optimises; a "
                  "PDD P pool splits its classes at the highest such thresholds only as far as the model-size limit "
                  "allows (a plan note names the cuts left out), its set queues at 1, 0.7 and 0.45 of the cap, so a "
                  "prfaas plan at a lower threshold or another utilisation tier can lie outside PDD's)")
