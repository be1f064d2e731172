"""Why chips stay idle: one line for every chip type in every datacenter the plan leaves
(partly) unused, computed from the performance model and the problem, never guessed.

in:  a :class:`~placer.problem.Problem` and a :class:`~placer.plan.Plan`
out: :func:`idle_reasons` — ``"16 of 48 L40S in dc-l40s idle: …"`` lines, in datacenter order.

The reasons are tried in this order; the first that holds is the line:

1. **memory**: weights + one context of the longest class fit in no shape of
   ``options.tp_degrees`` the datacenter's inventory allows;
2. **too small a remainder**: fewer idle chips than the smallest shape that fits;
3. **power**: the datacenter's ``power_kw`` leaves no room for one more instance;
4. **too slow for the SLA**: no fitting shape prefills any class within the TTFT budget
   (prefill alone, batch 1) nor decodes one request within the TPOT (step at batch 1) —
   or it can do one role only and the other role has no chip that can pair with it;
5. **the line too thin**: it can do one role only, the other role sits in another datacenter,
   and one instance's KV rate exceeds the line's spare Gbit/s (or one request's KV transfer
   alone misses the TTFT budget, or no line joins them);
6. **price**: the offered load is already served (more adds cost, no goodput), or a request
   served on this chip costs more than the plan's USD per SLA request (1/BCR); "dominated by"
   names the chip with the cheapest request for the same role and both USD per 1000 requests.

USD per 1000 requests of a role on a shape: P, the instance's price over the requests per
second it prefills at ``options.utilization_cap`` (Σ share × prefill seconds); a decoder, over
its design batch divided by Σ share × output tokens × step seconds (:func:`placer.flows.decode_design`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from placer.flows import Route, decode_context_tokens, decode_design, instance
from placer.ilp.shape_pools import candidate_shapes
from placer.pdd import P, P_MD
from placer.plan import Plan
from placer.problem import Problem

#: Served below this share of the offered load counts as "not all served".
SERVED_SHARE = 0.999


@dataclass(frozen=True)
class RoleCost:
    """One role's best shape of a chip: the shape, USD per 1000 requests, and the req/s one
    instance carries (``rps``)."""

    shape: int
    usd_per_1k: float
    rps: float


@dataclass(frozen=True)
class ChipFacts:
    """What the performance model says about one chip type for this problem."""

    chip: str
    fits: list  # shapes whose weights + the longest context fit
    prefill: RoleCost | None  # None: no fitting shape prefills any class within the TTFT budget
    decode: RoleCost | None  # None: no fitting shape decodes one request within the TPOT
    ttft_alone_s: float  # least prefill seconds of the cheapest class over fitting shapes (inf: none)
    tpot_alone_s: float  # least step seconds at batch 1 over fitting shapes (inf: none)


def _shape(shape) -> str:
    """``tp8`` for a plain tensor-parallel instance, the shape's own label (``8-dep``, ``16-pp2``) otherwise."""
    label = f"{shape}"
    return f"tp{label}" if label.isdigit() else label


def _usd(price_usd_per_h: float, rps: float) -> float:
    return math.inf if rps <= 0 else 1000 * price_usd_per_h / 3600 / rps


def chip_facts(problem: Problem, chip: str, count: int) -> ChipFacts:
    """The shapes of ``chip`` that ``count`` chips allow and fit, and each role's cheapest."""
    longest = max(c.input_tokens + c.output_tokens for c in problem.classes)
    ctx = decode_context_tokens(problem.classes)
    fits, prefill, decode = [], None, None
    ttft_alone, tpot_alone = math.inf, math.inf
    for shape in candidate_shapes(problem, count):
        im = instance(problem, chip, shape)
        if im.unsupported or not im.fits(longest):
            continue
        fits.append(shape)
        seconds = {c.name: im.prefill_s(c.input_tokens, c.hit_rate) for c in problem.classes}
        ttft_alone = min(ttft_alone, min(seconds.values()))
        if min(seconds.values()) <= problem.ttft_p90_s:
            mean_s = sum(c.share * seconds[c.name] for c in problem.classes)
            rps = problem.options.utilization_cap / mean_s
            cost = RoleCost(shape, _usd(im.price_usd_per_h, rps), rps)
            prefill = cost if prefill is None or cost.usd_per_1k < prefill.usd_per_1k else prefill
        tpot_alone = min(tpot_alone, im.step_s(1, ctx) / im.mtp_accept)
        batch, step_s = decode_design(problem, im)
        if batch >= 1:
            rps = batch / sum(c.share * c.output_tokens * step_s for c in problem.classes)
            cost = RoleCost(shape, _usd(im.price_usd_per_h, rps), rps)
            decode = cost if decode is None or cost.usd_per_1k < decode.usd_per_1k else decode
    return ChipFacts(chip, fits, prefill, decode, ttft_alone, tpot_alone)


def _used_chips(plan: Plan) -> dict[tuple[str, str], int]:
    used: dict[tuple[str, str], int] = defaultdict(int)
    for p in plan.pools:
        used[p.datacenter, p.chip] += p.count * int(p.tp)
    return used


def idle_reasons(problem: Problem, plan: Plan) -> list[str]:
    """One line per (datacenter, chip) with idle inventory (see the module docstring)."""
    used = _used_chips(plan)
    facts = {chip: chip_facts(problem, chip, max(dc.inventory.get(chip, 0) for dc in problem.datacenters))
             for chip in sorted({c for dc in problem.datacenters for c in dc.inventory})}
    lines = []
    for dc in problem.datacenters:
        for chip, count in sorted(dc.inventory.items()):
            idle = count - used.get((dc.name, chip), 0)
            if idle <= 0:
                continue
            why = _reason(problem, plan, dc.name, facts[chip], count, idle, used, facts)
            lines.append(f"{idle} of {count} {chip} in {dc.name} idle: {why}")
    return lines


def _reason(problem: Problem, plan: Plan, dc: str, f: ChipFacts, count: int, idle: int,
            used: dict, facts: dict[str, ChipFacts]) -> str:
    fits = [s for s in f.fits if s.chips <= count]
    if not fits:
        longest = max(c.input_tokens + c.output_tokens for c in problem.classes)
        shapes = [int(s) for s in candidate_shapes(problem, count)]
        return (f"memory: {problem.model.name} weights ({problem.weight_dtype}) + one {longest}-token context fit "
                f"in no instance of {f.chip} that {count} chip{'s' if count > 1 else ''} allow{'' if count > 1 else 's'} (tp {shapes or problem.options.tp_degrees}, "
                f"{problem.chips[f.chip].mem_gb:g} GB per chip)")
    smallest = min(s.chips for s in fits)
    if idle < smallest:
        return f"too few left: the smallest {f.chip} instance that fits needs {smallest} chips"
    power = _power_line(problem, dc, f.chip, smallest, used)
    if power:
        return power
    if f.prefill is None and f.decode is None:
        return (f"too slow for the SLA: prefill alone takes {f.ttft_alone_s:.2f} s > TTFT P90 {problem.ttft_p90_s:g} s "
                f"for the lightest class, and a batch-1 decode step {1000 * f.tpot_alone_s:.1f} ms > TPOT "
                f"{1000 * problem.tpot_s:g} ms, at its best shape")
    if f.prefill is None or f.decode is None:
        one = _one_role(problem, plan, dc, f, facts)
        if one:
            return one
    return _price(problem, plan, f, facts)


def _power_line(problem: Problem, dc: str, chip: str, chips: int, used: dict) -> str:
    limit_kw = problem.dc(dc).power_kw
    if limit_kw is None:
        return ""
    drawn_kw = sum(n * problem.chips[c].tdp_w for (d, c), n in used.items() if d == dc) / 1000
    need_kw = chips * problem.chips[chip].tdp_w / 1000
    if drawn_kw + need_kw <= limit_kw:
        return ""
    return (f"power: the plan draws {drawn_kw:.1f} of {dc}'s {limit_kw:g} kW; one more {chip} instance "
            f"({chips} chips) needs {need_kw:.1f} kW")


def _one_role(problem: Problem, plan: Plan, dc: str, f: ChipFacts, facts: dict[str, ChipFacts]) -> str:
    """A chip that can only prefill or only decode: why its partner is out of reach, or ""."""
    can = "prefill" if f.prefill is not None else "decode"
    slow = (f"a batch-1 decode step takes {1000 * f.tpot_alone_s:.1f} ms > TPOT {1000 * problem.tpot_s:g} ms"
            if can == "prefill" else
            f"prefill alone takes {f.ttft_alone_s:.2f} s > TTFT P90 {problem.ttft_p90_s:g} s for the lightest class")
    partner = "decode" if can == "prefill" else "prefill"
    dcs = [d.name for d in problem.datacenters
           if any(getattr(facts[c], partner) is not None for c, n in d.inventory.items() if n > 0)]
    if not dcs:
        return f"too slow for the SLA: it could only {can} ({slow}) and no chip anywhere can {partner} for it"
    if dc in dcs:
        return ""  # its partner sits in the same datacenter: no line; price decides
    rate, thin = _line_words(problem, plan, dc, dcs, can, getattr(f, can))
    if not thin:
        return ""
    return f"the line too thin: it could only {can} ({slow}), so its KV crosses the WAN, and {rate}"


def _line_words(problem: Problem, plan: Plan, dc: str, partner_dcs: list[str], can: str, cost) -> tuple[str, bool]:
    """(words, whether the line is too thin) for one instance of the chip in ``dc`` whose KV
    goes to (prefill) or comes from (decode) a partner datacenter."""
    pairs = [(dc, o) if can == "prefill" else (o, dc) for o in partner_dcs]
    pairs = [pr for pr in pairs if pr in problem.links]
    if not pairs:
        return f"no line joins {dc} to {', '.join(partner_dcs)}", True
    used = {(l.src, l.dst): l.gbit_per_s_used for l in plan.links}
    cap = problem.options.link_utilization_cap
    best = None
    for src, dst in pairs:
        link = problem.links[src, dst]
        spare = max(0.0, cap * link.gbit_per_s - used.get((src, dst), 0.0))
        kv_bits = sum(c.share * Route(problem, c, P_MD, src, dst, problem.options.drc).wan_bytes() * 8
                      for c in problem.classes)
        need = cost.rps * kv_bits / 1e9
        late = min(Route(problem, c, P_MD, src, dst, problem.options.drc).wan_s(0.0) for c in problem.classes)
        row = (spare - need, src, dst, spare, need, late)
        best = row if best is None or row[0] > best[0] else best
    _, src, dst, spare, need, late = best
    if late > problem.ttft_p90_s:
        return (f"one request's KV alone takes {late:.2f} s over {src}->{dst} (TTFT P90 "
                f"{problem.ttft_p90_s:g} s)"), True
    words = (f"one {_shape(cost.shape)} instance moves {need:.2f} Gbit/s of KV while {src}->{dst} has "
             f"{spare:.2f} Gbit/s spare (of {problem.links[src, dst].gbit_per_s:g}, cap {cap:g})")
    return words, need > spare


def _request_usd(f: ChipFacts) -> float:
    return (f.prefill.usd_per_1k if f.prefill else math.inf) + (f.decode.usd_per_1k if f.decode else math.inf)


def _price(problem: Problem, plan: Plan, f: ChipFacts, facts: dict[str, ChipFacts]) -> str:
    """The chip could serve: the load is served already, or its requests cost more than the plan's."""
    m = plan.metrics
    dominated = _dominated(plan, f, facts)
    if m.offered_rps > 0 and m.served_rps >= SERVED_SHARE * m.offered_rps:
        head = (f"price: the offered load is served ({m.served_rps:.2f} of {m.offered_rps:g} req/s), so more "
                f"{f.chip} would add cost and no goodput")
        return head + (f"; {dominated}" if dominated else "")
    budget = problem.options.budget_usd_per_h
    if budget is not None and m.cost_usd_per_h >= 0.99 * budget:
        return f"price: the plan spends its budget ({m.cost_usd_per_h:.2f} of {budget:g} USD/h)"
    own = _request_usd(f) if f.prefill and f.decode else None
    plan_usd = 1000 / m.bcr_requests_per_usd if m.bcr_requests_per_usd > 0 else math.inf
    where = (f"a request on {f.chip} alone costs {own:.3f} USD per 1000 against the plan's {plan_usd:.3f} per "
             f"1000 SLA requests (1/BCR), so more of it lowers the BCR") if own is not None else \
        f"the requests it would add cost more than the plan's {plan_usd:.3f} USD per 1000 SLA requests"
    return f"price: {where}" + (f"; {dominated}" if dominated else "")


def _dominated(plan: Plan, f: ChipFacts, facts: dict[str, ChipFacts]) -> str:
    """"dominated by X for P (a vs b USD per 1000 requests)" for each role where a chip the plan
    uses for that role is cheaper per request; "" when none is."""
    roles = {"P": ("prefill", {p.chip for p in plan.pools if p.role == P and p.count > 0}),
             "decode": ("decode", {p.chip for p in plan.pools if p.role != P and p.count > 0})}
    out = []
    for label, (attr, chips) in roles.items():
        mine = getattr(f, attr)
        rivals = [(getattr(facts[c], attr), c) for c in chips if c != f.chip and c in facts
                  and getattr(facts[c], attr) is not None]
        if not rivals:
            continue
        best, chip = min(rivals, key=lambda rc: rc[0].usd_per_1k)
        if mine is None or best.usd_per_1k < mine.usd_per_1k:
            own = f"{mine.usd_per_1k:.3f} on {_shape(mine.shape)}" if mine else f"{f.chip} cannot within the SLA"
            out.append(f"{chip} is cheaper for {label} ({best.usd_per_1k:.3f} USD per 1000 requests on "
                       f"{_shape(best.shape)} vs {own})")
    return ("dominated: " + "; ".join(out)) if out else ""
