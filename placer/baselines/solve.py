"""Solving the baselines, and keeping every comparison with PDD honest.

in:  a Problem (and optionally the PDD plan already solved)
out: :func:`solve_baseline` — the best plan of one baseline (:mod:`placer.baselines.policies`
     poses its rules), marked with its ``baseline`` object (``name``, ``rules``; ``prfaas``:
     ``local``, ``threshold``, ``threshold_uncached_tokens``); :func:`compare` — PDD beside
     every baseline (and, when one is shown at partial load, PDD under the same rule:
     :func:`best_within_inventory`); :data:`SOLVES_PER_BASELINE` and :data:`PDD_SOLVES`, the most
     solves :func:`compare` runs (the service's deadline counts them).

:func:`compare` keeps comparisons honest (each plan carries a ``baseline`` object,
an extension of the plan JSON; read by the CLI, the report and the API):

* a baseline that has no meaning in the scenario (``cross-dc-pd`` or ``prfaas`` in one
  datacenter) is ``{"error": "not applicable: one datacenter", "not_applicable": true}``,
  never a $0 plan;
* a baseline that carries less than the offered load says the most it carries within the
  SLA on the scenario's inventory (``baseline.max_within_inventory_rps``, a max-served
  solve; its BCR plan may stop below that, where the BCR is best), and is solved again **at equal
  load** with its datacenters' inventories scaled up (``SCALE_MAX`` × at most, the
  chips priced as the catalog prices them), given with the chips it took under the
  result's ``"scaled"`` key (``baselines`` keeps one plan per baseline, as
  docs/contracts.md has it) and, in ``baseline.beyond_inventory``, the chips it bought
  beyond each datacenter's inventory and their catalog price; when even that has no
  plan the baseline is marked ``cannot carry`` with the solver's reason;
* a baseline shown at partial load (it stops where its BCR is best, leaving load unserved) is
  set beside PDD under the same rule: ``pdd_best_within_inventory``, PDD's best BCR within the
  inventory when it too may leave load (``options.min_served_fraction`` 0; :data:`BEST_WITHIN_NOTE`
  heads its notes), while ``pdd`` stays the plan at the whole offered load;
* a baseline that cannot meet the SLA says why: from the flows (the full KV of a class over the
  line it crosses against the TTFT budget), the line its KV queues on, the TTFT P90 over its
  budget (prefill queueing), or the decode step over the TPOT SLA;
* ``hetero-same-dc-pd`` whose pools equal ``same-dc-pd``'s says so and why (no second
  chip type in that datacenter, or the best mix is one chip); a ``prfaas`` plan that
  prefills nothing remotely says it is same-dc-pd in effect (its scaled twin is dropped).
"""

from __future__ import annotations

import dataclasses
import math

from placer.baselines.policies import (
    BASELINES, RULES, architectures, canonical, not_applicable, prfaas_groups, prfaas_reading,
)
from placer.baselines.threshold import best_variant
from placer.errors import InfeasiblePlanError, PlacerError
from placer.flows import Route
from placer.optimize import SolveConfig, optimize, solve_architecture
from placer.plan import Plan
from placer.problem import Problem
from placer.slacheck import TOLERANCE

SCALE_MAX = 64  # most times a datacenter's inventory is multiplied to carry the offered load
#: The note (a plan's second, after "baseline <name>") of a baseline shown at partial load, or solved
#: without the SLA row (:func:`solve_baseline`); the frontier's status reads them.
PARTIAL_NOTE = "cannot carry the whole offered load; shown at the load it can"
NO_SLA_NOTE = "cannot meet the TTFT SLA; shown as the cheapest plan carrying the load without the SLA constraint"
NO_SLA_PARTIAL_NOTE = "cannot meet the TTFT SLA nor carry the load; shown carrying the most it can"
#: :func:`solve_baseline`'s attempts (each one time limit, its variants sharing it), then for a baseline
#: that carries less than the load :func:`most_within_inventory` and :func:`scale_to_load`.
SOLVES_PER_BASELINE = 4 + 2
#: PDD's own solve and, when a baseline is shown at partial load, :func:`best_within_inventory`'s.
PDD_SOLVES = 2
BEST_WITHIN_NOTE = ("PDD at its best BCR within the inventory: it may leave load unserved "
                    "(options.min_served_fraction 0), as a baseline shown at partial load does")


def solve_baseline(problem: Problem, name: str, config: SolveConfig = SolveConfig()) -> Plan:
    """The best plan of baseline ``name``.

    A baseline that cannot carry the whole offered load is shown at the load it can
    carry; one that cannot meet the TTFT SLA at all is shown without the SLA row (its
    SLA goodput, and so its BCR, then counts only the requests that do meet it).
    InfeasiblePlanError when even that has no plan, or when the baseline has no meaning
    in the scenario (:func:`~placer.baselines.policies.not_applicable`). ``name`` may be an
    alias (``splitwise``); the plan's ``baseline`` object carries its ``rules``.
    """
    name = canonical(name)
    why_not = not_applicable(problem, name)
    if why_not:
        raise InfeasiblePlanError(f"baseline {name}: {why_not}")
    objective = config.objective
    attempts = [
        (problem, objective, True, None),
        (_with_min_served(problem, 0.0), objective, True, PARTIAL_NOTE),
        (problem, "min-cost", False, NO_SLA_NOTE),
        (_with_min_served(problem, 0.0), "max-served", False, NO_SLA_PARTIAL_NOTE),
    ]
    first_error = None
    for prob, obj, sla, note in attempts:
        try:
            plan = _best_variant(prob, name, config.but(objective=obj), sla)
        except InfeasiblePlanError as err:
            first_error = first_error or err
            continue
        notes = [f"baseline {name}", *([note] if note else []), *plan.notes]
        return described(problem, plan.model_copy(update={"objective": objective, "notes": notes}), name)
    raise InfeasiblePlanError(f"baseline {name}: {first_error.reason}")


def described(problem: Problem, plan: Plan, name: str) -> Plan:
    """The plan with its ``baseline`` object's ``name`` and ``rules`` (``prfaas``: also the local
    datacenter and the threshold the plan implies, :func:`~placer.baselines.policies.prfaas_reading`)."""
    extra = prfaas_reading(problem, plan) if name == "prfaas" else {}
    return _marked(plan, name=name, rules=RULES[name], **extra)


def _with_min_served(problem: Problem, fraction: float) -> Problem:
    return dataclasses.replace(problem, options=problem.options.model_copy(update={"min_served_fraction": fraction}))


def _best_variant(problem: Problem, name: str, config: SolveConfig, sla: bool) -> Plan:
    if name == "prfaas":  # a local datacenter × K + 1 thresholds: searched, not each evaluated
        return best_variant(problem, prfaas_groups(problem), config, sla)
    best, reasons = None, []
    objective = config.objective
    archs = [dataclasses.replace(a, enforce_sla=sla) for a in architectures(problem, name)]
    for arch in archs:
        try:
            plan, _, _ = solve_architecture(problem, arch, config.but(time_limit_s=config.time_limit_s / len(archs)))
        except InfeasiblePlanError as err:
            reasons.append(err.reason)
            continue
        if best is None or _score(plan, objective) > _score(best, objective):
            best = plan
    if best is None:
        raise InfeasiblePlanError(reasons[0] if reasons else "no variant")
    return best


def _score(plan: Plan, objective: str) -> float:
    if objective == "max-served":
        return plan.metrics.served_rps
    if objective == "min-cost":
        return -plan.metrics.cost_usd_per_h
    if objective == "max-goodput":
        return plan.metrics.goodput_rps
    return plan.metrics.bcr_requests_per_usd


def compare(problem: Problem, config: SolveConfig = SolveConfig(), pdd: Plan | None = None) -> dict:
    """``{"pdd": plan, "baselines": {name: plan or {"error": reason}}, "scaled": {name: plan}}``,
    and ``"pdd_best_within_inventory"`` (a plan or ``{"error"}``) when a baseline is shown at
    partial load.

    A baseline carrying less than the offered load gets a ``scaled`` plan (equal load,
    inventories scaled) or is marked ``cannot carry``; each plan's ``baseline`` object
    holds its verdict (see the module docstring).
    """
    pdd = pdd or optimize(problem, config.but(marginals=False))
    out: dict = {}
    scaled_out: dict = {}
    for name in BASELINES:
        why_not = not_applicable(problem, name)
        if why_not:
            out[name] = {"error": why_not, "not_applicable": True, "rules": RULES[name]}
            continue
        try:
            plan = solve_baseline(problem, name, config)
        except PlacerError as err:
            out[name] = {"error": str(err), "rules": RULES[name]}
            continue
        out[name] = _marked(plan, name=name, verdict=sla_verdict(problem, plan))
        if carries_less(plan):
            out[name] = _marked(out[name], max_within_inventory_rps=most_within_inventory(problem, name, config))
            scaled = scale_to_load(problem, name, config)
            if isinstance(scaled, Plan):
                scaled_out[name] = scaled
            else:
                out[name] = _marked(out[name], cannot_carry=scaled)
    _mark_same_as(problem, out, scaled_out)
    _mark_local_prfaas(problem, out, scaled_out)
    result = {"pdd": pdd, "baselines": out, "scaled": scaled_out}
    if any(isinstance(p, Plan) and carries_less(p) for p in out.values()):
        result["pdd_best_within_inventory"] = best_within_inventory(problem, config, pdd)
    return result


def best_within_inventory(problem: Problem, config: SolveConfig, pdd: Plan) -> Plan | dict:
    """PDD under the rule a baseline shown at partial load follows: its best BCR on the scenario's
    inventory, free to leave load unserved (``options.min_served_fraction`` 0), its notes headed by
    :data:`BEST_WITHIN_NOTE`; ``pdd`` itself when that solve finds no higher BCR (``pdd`` is a plan
    of that problem too); ``{"error": reason}`` when the solve fails. Its ``best_within_inventory``
    object (a plan JSON extension) holds that solve's ``status`` and ``mip_gap`` and whether the
    plan is the whole-load one (``whole_load_plan``): not "optimal" there, a higher BCR may exist."""
    best, status, gap = pdd, pdd.solver.status, pdd.solver.mip_gap
    if problem.options.min_served_fraction > 0:
        try:
            plan = optimize(_with_min_served(problem, 0.0), config.but(marginals=False))
        except PlacerError as err:
            return {"error": str(err)}
        status, gap = plan.solver.status, plan.solver.mip_gap
        if plan.metrics.bcr_requests_per_usd > pdd.metrics.bcr_requests_per_usd:
            best = plan
    info = {"rule": BEST_WITHIN_NOTE, "status": status, "mip_gap": gap, "whole_load_plan": best is pdd}
    return best.model_copy(update={"notes": [BEST_WITHIN_NOTE, *best.notes], "best_within_inventory": info})


def carries_less(plan: Plan) -> bool:
    """Whether the plan serves less than 99.9 % of the offered load."""
    m = plan.metrics
    return m.offered_rps > 0 and m.served_rps < 0.999 * m.offered_rps


def most_within_inventory(problem: Problem, name: str, config: SolveConfig) -> float:
    """The most req/s baseline ``name`` carries within the SLA on the scenario's inventory
    (objective max-served, the SLA row kept), or 0 when no load meets the SLA. The BCR
    plan of a baseline that cannot carry the whole load may carry less than this: it stops
    where the BCR is best."""
    try:
        plan = _best_variant(_with_min_served(problem, 0.0), name, config.but(objective="max-served"), sla=True)
    except InfeasiblePlanError:
        return 0.0
    return round(plan.metrics.served_rps, 4)


def scale_to_load(problem: Problem, name: str, config: SolveConfig) -> Plan | str:
    """Baseline ``name`` at the whole offered load, every datacenter's inventory scaled
    up to ``SCALE_MAX`` × (chips priced as in the catalog); the plan, or the reason it has none."""
    scaled = dataclasses.replace(problem, datacenters=tuple(
        dataclasses.replace(dc, inventory={c: n * SCALE_MAX for c, n in dc.inventory.items()})
        for dc in problem.datacenters))
    try:
        plan = _best_variant(scaled, name, config, sla=True)
    except InfeasiblePlanError as err:
        reason = err.reason.replace(" (or lower options.min_served_fraction)", "")
        return (f"cannot carry the offered {problem.arrival_rps:g} req/s within the SLA even with "
                f"{SCALE_MAX}x the chips (so not the inventory): {reason}")
    took = chips_taken(problem, plan)
    note = (f"scaled to carry the offered {problem.arrival_rps:g} req/s: it took {took} "
            f"(chips priced as the catalog; inventory unbounded)")
    plan = plan.model_copy(update={"objective": config.objective, "notes": [f"baseline {name}", note, *plan.notes]})
    bought = beyond_inventory(problem, plan)
    return _marked(described(problem, plan, name), scaled=note, verdict=sla_verdict(problem, plan),
                   beyond_inventory=bought, beyond_inventory_usd_per_h=round(sum(b["usd_per_h"] for b in bought), 4))


def beyond_inventory(problem: Problem, plan: Plan) -> list[dict]:
    """The chips a plan uses beyond its datacenters' inventories, one entry per (datacenter,
    chip): ``{"datacenter", "chip", "chips", "inventory", "usd_per_h"}`` (``chips``: the
    number bought beyond ``inventory``; ``usd_per_h``: at the catalog price)."""
    used: dict[tuple[str, str], int] = {}
    for p in plan.pools:
        used[(p.datacenter, p.chip)] = used.get((p.datacenter, p.chip), 0) + p.count * p.tp
    out = []
    for (dc, chip), n in sorted(used.items()):
        have = problem.dc(dc).inventory.get(chip, 0)
        if n > have:
            out.append({"datacenter": dc, "chip": chip, "chips": n - have, "inventory": have,
                        "usd_per_h": round((n - have) * problem.chips[chip].price_usd_per_h, 4)})
    return out


def chips_taken(problem: Problem, plan: Plan) -> str:
    """``"160 Ascend-910B in dc-a (inventory 96)"``, one part per (datacenter, chip) used."""
    used: dict[tuple[str, str], int] = {}
    for p in plan.pools:
        used[(p.datacenter, p.chip)] = used.get((p.datacenter, p.chip), 0) + p.count * p.tp
    parts = [f"{n} {chip} in {dc} (inventory {problem.dc(dc).inventory.get(chip, 0)})"
             for (dc, chip), n in sorted(used.items()) if n > 0]
    return ", ".join(parts) or "no chips"


def sla_verdict(problem: Problem, plan: Plan) -> str | None:
    """Why a plan meets the TTFT SLA for few of its requests, from the flows: the classes
    whose KV transfer alone, over the line their route crosses, exceeds the TTFT P90 budget.
    None when the plan meets the SLA for at least 90 % of what it serves."""
    if plan.metrics.sla_attainment >= 0.9 or plan.metrics.served_rps <= 0:
        return None
    classes = {c.name: c for c in problem.classes}
    slow: dict[str, tuple[float, str]] = {}
    for r in plan.routes:
        if r.src == r.dst or r.rps <= 0:
            continue
        c = classes[r.request_class]
        transfer_s = Route(problem, c, r.pipeline, r.src, r.dst, problem.options.drc).wan_s(0.0)
        if transfer_s > problem.ttft_p90_s and transfer_s > slow.get(c.name, (0.0, ""))[0]:
            slow[c.name] = (transfer_s, f"{r.src}->{r.dst}")
    attained = f"{100 * plan.metrics.sla_attainment:.0f} % of its requests meet it"
    if not slow:
        return _queue_or_tpot(problem, plan, attained)
    fastest = min(t for t, _ in slow.values())
    line = next(iter(slow.values()))[1]
    gbit = problem.links[tuple(line.split("->"))].gbit_per_s  # type: ignore[index]
    return (f"cannot meet the SLA: the KV of {len(slow)} of {len(classes)} classes takes "
            f"{_fmt_s(fastest)} or more over the {gbit:g} Gbit/s line {line} (no decode-side cache), above the "
            f"{problem.ttft_p90_s:g} s TTFT P90 budget; {attained}")


def _queue_or_tpot(problem: Problem, plan: Plan, attained: str) -> str:
    """What binds a plan whose KV crosses no line too slowly: with its TTFT P90 within the budget, the
    decode step over the TPOT SLA (the SLA counts a request on a decode pool over TPOT as missed);
    else the line its KV queues on, or prefill queueing."""
    m = plan.metrics
    if m.ttft_p90_s <= problem.ttft_p90_s * (1 + TOLERANCE):
        over = (f"its decode steps take {m.tpot_s:.3f} s per token, over" if m.tpot_s > problem.tpot_s
                else "some of its decode pools step over")
        return (f"cannot meet the SLA: {attained}: {over} the {problem.tpot_s:g} s TPOT SLA (its TTFT P90 "
                f"{m.ttft_p90_s:.2f} s is within the {problem.ttft_p90_s:g} s budget)")
    ttft = f"its TTFT P90 {m.ttft_p90_s:.2f} s is over the {problem.ttft_p90_s:g} s budget"
    busiest = max(plan.links, key=lambda u: u.gbit_per_s_used / u.gbit_per_s_capacity
                  if u.gbit_per_s_capacity else 0.0, default=None)
    if busiest is None or busiest.gbit_per_s_used <= 0:
        return f"cannot meet the SLA: {attained}: {ttft} (prefill queueing at the load it carries)"
    return (f"cannot meet the SLA: every request's KV queues on the line {busiest.src}->{busiest.dst}, "
            f"busy {busiest.gbit_per_s_used:.1f} of {busiest.gbit_per_s_capacity:g} Gbit/s ({ttft}); {attained}")


def _fmt_s(seconds: float) -> str:
    return "inf s" if math.isinf(seconds) else f"{seconds:.1f} s"


def _mark_same_as(problem: Problem, out: dict, scaled: dict) -> None:
    """Mark ``hetero-same-dc-pd`` whose pools equal ``same-dc-pd``'s, with the reason (its
    scaled twin, then the same as same-dc-pd's, is dropped)."""
    same, hetero = out.get("same-dc-pd"), out.get("hetero-same-dc-pd")
    if not (isinstance(same, Plan) and isinstance(hetero, Plan)) or _pools(same) != _pools(hetero):
        return
    twin = scaled.get("hetero-same-dc-pd")
    if isinstance(twin, Plan) and _pools(twin) == _pools(scaled.get("same-dc-pd", twin)):
        del scaled["hetero-same-dc-pd"]
    dcs = sorted({p.datacenter for p in hetero.pools if p.count > 0})
    single = [dc for dc in dcs if len(problem.dc(dc).inventory) < 2]
    why = (f"no second chip type in {', '.join(single)}" if single else
           "its best mix uses one chip type for P and D")
    out["hetero-same-dc-pd"] = _marked(hetero, same_as=f"same as same-dc-pd: {why}")


def _mark_local_prfaas(problem: Problem, out: dict, scaled: dict) -> None:
    """Mark a ``prfaas`` plan that prefills nothing remotely: it is plain PD in its local
    datacenter, same-dc-pd in effect (its scaled twin too, then dropped when same-dc-pd has one)."""
    for where in (out, scaled):
        plan = where.get("prfaas")
        if not isinstance(plan, Plan) or any(r.src != r.dst and r.rps > 0 for r in plan.routes):
            continue
        local = _info(plan).get("local", "its local datacenter")
        if where is scaled and "same-dc-pd" in scaled:
            del scaled["prfaas"]
            continue
        where["prfaas"] = _marked(plan, same_as=f"same as same-dc-pd in effect: no prompt is worth prefilling "
                                                 f"remotely, so it is PD in {local} alone")


def _info(plan: Plan) -> dict:
    return getattr(plan, "baseline", None) or {}


def _pools(plan: Plan) -> set[tuple]:
    return {(p.role, p.datacenter, p.chip, p.tp, p.count) for p in plan.pools if p.count > 0}


def _marked(plan: Plan, **fields) -> Plan:
    """The plan with ``fields`` added to its ``baseline`` object (a plan JSON extension)."""
    info = {**(getattr(plan, "baseline", None) or {}), **{k: v for k, v in fields.items() if v is not None}}
    return plan.model_copy(update={"baseline": info})
