"""The MILP's data: its sets and parameters, prepared before any variable exists.

in:  a :class:`~placer.problem.Problem` and an :class:`Architecture` (PDD or a PD baseline)
out: :class:`Prepared` — candidate pools (P and A pools split into queues), decode and
     aggregated designs,
     count bounds, flows and every flow's parameters (prefill and TTFT seconds, lateness
     under its queue's waiting law, KV hold time, eager tokens, WAN bytes), from
     :mod:`placer.flows` and :mod:`placer.perfmodel` — the sets and parameters of the
     formulation written in :mod:`placer.ilp.formulation`'s docstring (a pool's P queues:
     :mod:`placer.ilp.p_tiers`).
"""

from __future__ import annotations

import math
from collections import defaultdict

from placer.aggregated import (
    AggDesign, agg_design, agg_first_token_law, agg_light_classes, agg_wait_law, chunk_choices,
)
from placer.flows import (
    Route, decode_context_tokens, decode_design, decode_kv_headroom, instance, relay_room_factor,
    slowest_rdma_peer,
)
from placer.p_queues import light_classes
from placer.pdd import (
    AGG, D, LIGHT, MD, MIX, P, P_A, P_D, P_MD, P_RLD, P_RLD_MD, PREFILL_ROLES, RELAY_PIPELINES, RLD,
    streamer_site,
)
from placer.ilp.config import check_build_deadline, checked
from placer.ilp.p_tiers import (  # noqa: F401 - re-exported: the P queues of a pool
    GEOMETRIC_TIERS, chip_p_queues, heavy_classes, p_queues, p_tiers, p_wait_law, split_mode, tier_utilizations,
)
from placer.ilp.p_cuts import SPLIT_NONE, add_whole_sets  # noqa: F401 - re-exported for the formulation
from placer.ilp.shape_pools import candidate_shapes, drop_dominated, shape_notes
from placer.perfmodel import InstanceModel
from placer.problem import Problem
from placer.ilp.sets import (  # noqa: F401 - re-exported: the MILP's sets live in placer.ilp.sets
    Architecture, DecodeDesign, Flow, Pool, Prepared, pdd_architecture, set_queue_name,
)


# --- data: candidate pools -------------------------------------------------------------

def _decode_roles(arch: Architecture) -> list[str]:
    if P_D in arch.pipelines:
        return [D]
    return [r for r, pipes in ((RLD, RELAY_PIPELINES), (MD, (P_MD, P_RLD_MD)))
            if any(p in arch.pipelines for p in pipes)]


def _decodes_in(arch: Architecture, role: str, dc: str) -> bool:
    """Whether ``arch`` lets ``role`` decode in ``dc`` (RLD sits where P may)."""
    if role in (MD, D) and arch.decode_dcs is not None and dc not in arch.decode_dcs:
        return False
    return not (role == RLD and arch.p_dcs is not None and dc not in arch.p_dcs)


def candidate_pools(problem: Problem, arch: Architecture) -> tuple[list[Pool], dict, dict, list[str]]:
    """Q: pools worth a variable, their instance models and decode designs; notes on what was excluded."""
    max_input = max(c.input_tokens + c.output_tokens for c in problem.classes)
    ctx = decode_context_tokens(problem.classes)
    decode_roles = _decode_roles(arch)
    pools, instances, decode, agg, notes = [], {}, {}, {}, shape_notes(problem)
    tiers: dict = {}  # (chip, tp, admits) → p_tiers, (chip, tp, mode) → its set queues: the same in every dc
    designs: dict = {}  # (chip, tp) → its decode design and KV headroom, the same in every datacenter
    disaggregated = any(pipe != P_A for pipe in arch.pipelines)
    mode = split_mode(problem, tiers, notes) if disaggregated else SPLIT_NONE  # the P split (p_tiers, p_cuts)
    for dc in problem.datacenters:
        check_build_deadline()
        for chip, count in sorted(dc.inventory.items()):
            if arch.chips is not None and chip not in arch.chips:
                continue
            for tp in candidate_shapes(problem, count):  # each shape's P queues, then its decode pools:
                im = instance(problem, chip, tp)  # the columns' order, which the solver's path follows
                if im.unsupported:
                    notes.append(im.unsupported)
                    continue
                if not im.fits(max_input):
                    notes.append(f"{chip} tp{tp}: weights + one {max_input}-token context do not fit")
                    continue
                if disaggregated and (arch.p_dcs is None or dc.name in arch.p_dcs):
                    for pool, _ in chip_p_queues(problem, dc.name, chip, {tp: im}, arch.admits(dc.name), tiers, mode):
                        pools.append(pool)
                        instances[pool] = im
                for role in decode_roles:
                    if not _decodes_in(arch, role, dc.name):
                        continue
                    if (chip, tp) not in designs:  # the same in every datacenter and decode role
                        designs[chip, tp] = decode_design(problem, im)
                    batch, step = designs[chip, tp]
                    if batch < 1:
                        one = im.step_s(1, ctx)
                        notes.append(
                            f"{chip} tp{tp}: one decode step takes {one:.4f} s > TPOT {problem.tpot_s} s"
                            if one > problem.tpot_s else
                            f"{chip} tp{tp}: its KV holds less than one request of the mix at the occupancy quantile"
                        )
                        continue
                    pool = Pool(role, dc.name, chip, tp)
                    pools.append(pool)
                    instances[pool] = im
                    if (chip, tp, "kv") not in designs:
                        designs[chip, tp, "kv"] = decode_kv_headroom(problem, im)
                    decode[pool] = DecodeDesign(im, batch, step, ctx, designs[chip, tp, "kv"])
                if P_A in arch.pipelines and (arch.p_dcs is None or dc.name in arch.p_dcs):
                    for pool, design in _a_queues(problem, dc.name, chip, tp, im, notes):
                        pools.append(pool)
                        instances[pool] = im
                        agg[pool] = design
    pools = drop_dominated(problem, pools, instances, decode, notes)
    return pools, instances, decode, agg, sorted(set(notes))


def _a_queues(problem: Problem, dc: str, chip: str, tp: int, im: InstanceModel,
              notes: list[str]) -> list[tuple[Pool, AggDesign]]:
    """The A queues of one physical pool: per chunk size (:func:`placer.aggregated.chunk_choices`)
    whose design meets the TPOT, a "mix" queue at each of :data:`GEOMETRIC_TIERS` of the cap and
    a "light" one at the cap when some classes, but not all, are light on it."""
    cap = problem.options.utilization_cap
    out = []
    chunks = chunk_choices(problem, im)
    if im.pp > 1:
        notes.append(f"{chip} tp{tp}: no aggregated pools in {im.pp} pipeline stages (a mixed step through a "
                     "pipeline is not modelled)")
    elif not chunks:
        notes.append(f"{chip} tp{tp}: no aggregated design meets TPOT {problem.tpot_s} s with any chunk")
    for chunk in chunks:
        design = agg_design(problem, im, chunk)
        if design.batch < 1:
            notes.append(f"{chip} tp{tp}: no aggregated batch meets TPOT {problem.tpot_s} s with {chunk}-token chunks")
            continue
        out += [(Pool(AGG, dc, chip, tp, round(cap * share, 4), MIX, chunk), design) for share in GEOMETRIC_TIERS]
        light = agg_light_classes(problem, design)
        if light and len(light) < len(problem.classes):
            out.append((Pool(AGG, dc, chip, tp, cap, LIGHT, chunk), design))
    return out


def _enough(problem: Problem, q: Pool, im: InstanceModel, decode: dict, agg: dict, secs: dict) -> int:
    """Instances of ``q`` that would carry the whole offered load alone: a valid upper
    bound (more can only add cost) that narrows the branch-and-bound search (``secs``: each P
    instance's prefill seconds per class, by chip and shape)."""
    a = problem.arrival_rps
    if q.role == AGG:
        design, kv = agg[q], problem.kv_bytes_per_token
        budget = sum(c.share * a * design.service_s(c) for c in problem.classes) / q.util
        slots = sum(c.share * a * design.decode_s(c) for c in problem.classes) / (
            problem.options.utilization_cap * design.batch)
        memory = sum(c.share * a * design.resident_byte_s(c, kv) for c in problem.classes) / im.kv_capacity_bytes
        return math.ceil(max(budget, slots, memory) + 1e-9)
    if q.role == P:
        work = sum(c.share * a * s for c, s in zip(problem.classes, secs[q.chip, q.tp], strict=True))
        return math.ceil(work / q.util + 1e-9)
    design = decode[q]
    busy = sum(c.share * a * c.output_tokens * design.step_s for c in problem.classes)
    # (C7)'s weights: RLD's relay room factor only scales some of its rows up, so the bound adds it
    room = relay_room_factor(problem.options.link_utilization_cap) if q.role == RLD else 1.0
    kv = room * sum(c.share * a * c.output_tokens * design.step_s * design.kv_weight(c) for c in problem.classes)
    limit = design.kv_limit_tokens
    return max(math.ceil(busy / (problem.options.utilization_cap * design.batch) + 1e-9),
               math.ceil(kv / limit + 1e-9) if limit > 0 else problem.options.max_instances_per_pool)


def _prefill_secs(problem: Problem, im: InstanceModel) -> list[float]:
    """Each class's prefill seconds alone on ``im``."""
    return [im.prefill_s(c.input_tokens, c.hit_rate) for c in problem.classes]


def _count_bounds(problem: Problem, pools: list[Pool], instances: dict, decode: dict, agg: dict,
                  secs: dict) -> dict[tuple, int]:
    """The bound of n_q per physical pool: max instances, inventory, and what carries the load alone
    (``secs``: as :func:`_enough` reads it)."""
    bounds: dict[tuple, int] = {}
    for key, qs in _grouped(pools, lambda q: q.key).items():
        check_build_deadline()
        q = qs[0]
        dc = problem.dc(q.dc)
        bounds[key] = min(problem.options.max_instances_per_pool, dc.inventory.get(q.chip, 0) // q.tp,
                          max(_enough(problem, t, instances[t], decode, agg, secs)
                              for t in qs))
    return bounds


# --- data: flows and their parameters ----------------------------------------------------

def _flows(problem: Problem, arch: Architecture, pools: list[Pool]) -> list[Flow]:
    """F: every (class, pipeline, P queue, destination) the architecture and the pools allow."""
    decode_dcs = {(q.role, q.dc) for q in pools if q.role != P}
    reach: dict[str, list[str]] = {}  # src -> the datacenters its lines reach, found once
    flows = []
    for k, c in enumerate(problem.classes):
        for p in checked((q for q in pools if q.role == P), every=64):  # each: a flow per line and pipeline
            src = p.dc
            if src not in reach:
                reach[src] = [d for d in problem.dc_names
                              if d != src and (src, d) in problem.links and problem.links[(src, d)].gbit_per_s > 0]
            reachable = reach[src]
            for pipe in arch.pipelines:
                if pipe == P_MD:
                    dsts = [d for d in [src, *reachable] if (MD, d) in decode_dcs]
                elif pipe == P_RLD_MD:
                    dsts = [d for d in reachable if (MD, d) in decode_dcs] if (RLD, src) in decode_dcs else []
                elif pipe == P_RLD:
                    dsts = [src] if c.filterable and (RLD, src) in decode_dcs else []
                else:  # P-D
                    options = {True: [src], False: reachable, None: [src, *reachable]}[arch.same_dc]
                    dsts = [d for d in options if (D, d) in decode_dcs]
                flows.extend(Flow(k, pipe, p, d) for d in dsts)
        if P_A in arch.pipelines:
            flows.extend(Flow(k, P_A, a, a.dc) for a in pools if a.role == AGG)
    return flows


def _admitted(problem: Problem, flows: list[Flow], pools: list[Pool], instances: dict,
              agg: dict) -> list[Flow]:
    """The flows whose class the P or A queue admits (a light queue takes light classes only, a "set"
    queue its own)."""
    everyone = set(range(len(problem.classes)))
    light: dict[tuple, set] = {}  # (chip, shape) -> its light classes, the same in every datacenter
    for p in pools:
        if p.role == P and p.mix == LIGHT and (p.chip, p.tp) not in light:
            light[p.chip, p.tp] = set(light_classes(problem, instances[p]))
    admitted = {p: (p.admits if p.admits else light[p.chip, p.tp] if p.mix == LIGHT else everyone)
                for p in pools if p.role == P}
    admitted.update({a: (agg_light_classes(problem, agg[a]) if a.mix == LIGHT else everyone)
                     for a in pools if a.role == AGG})
    return [f for f in checked(flows) if f.k in admitted[f.p]]


def _flow_laws(problem: Problem, arch: Architecture, flows: list[Flow], pools: list[Pool], instances: dict,
               prefill: dict, agg: dict) -> tuple[dict, dict, dict, dict]:
    """ttft[f], late[f], hold[f] and (relayed flows) RLD's tokens, at the planning caps; an RDMA
    copy priced at the slowest candidate decoder of the flow's first-token site (the flow may
    land on any of them)."""
    u_link = problem.options.link_utilization_cap
    waits = {p: p_wait_law(problem, instances[p], p.util, p.mix, p.admits) for p in pools if p.role == P}
    waits.update({a: agg_wait_law(problem, agg[a], a.util, a.mix) for a in pools if a.role == AGG})
    sites = _grouped([q for q in pools if q.role not in PREFILL_ROLES], lambda q: (q.role, q.dc))
    peers = {site: slowest_rdma_peer(instances[q] for q in qs) for site, qs in sites.items()}
    ttft, late, hold, eager = {}, {}, {}, {}
    # a route (class, pipeline, line, P instance) and its KV timings, the same for every P queue (tier) of a pool
    routes: dict[tuple, tuple[Route, float, float]] = {}
    for f in checked(flows):  # a full mesh has millions of flows: the deadline holds within them
        c, p = problem.classes[f.k], f.p
        if f.pipeline == P_A:  # aggregated: no KV moves; the budget's wait (placer.aggregated)
            det, tail = agg_first_token_law(agg[p], c, waits[p])
            ttft[f], late[f], hold[f] = det, tail.prob_exceeds(problem.ttft_p90_s - det), det
            continue
        im = instances[p]
        key = (f.k, f.pipeline, p.dc, f.dst, id(im))
        if key not in routes:
            route = Route(problem, c, f.pipeline, p.dc, f.dst, arch.drc, im,
                          peers.get(streamer_site(f.pipeline, p.dc, f.dst)))
            routes[key] = route, route.staged_kv_s(u_link), route.wan_s(u_link) if f.pipeline == P_RLD_MD else 0.0
        route, staged, wan = routes[key]
        det, tail = route.first_token_law(waits[p], u_link)
        ttft[f] = det + tail.wan_excess_mean_s  # mean without queueing
        late[f] = tail.prob_exceeds(problem.ttft_p90_s - det)
        hold[f] = prefill[(f.k, p)] + staged
        if f.pipeline == P_RLD_MD:
            eager[f] = wan
        elif f.pipeline == P_RLD:
            eager[f] = math.inf
    return ttft, late, hold, eager


def _undominated(flows: list[Flow], late: dict[Flow, float]) -> list[Flow]:
    """Drop a relayed flow whose direct twin (same class, P queue and destination) is late no
    more often: it needs an RLD besides and holds KV on P as long."""
    direct = {(f.k, f.p, f.dst): late[f] for f in checked(flows) if f.pipeline == P_MD}
    return [f for f in checked(flows)
            if not (f.pipeline == P_RLD_MD and direct.get((f.k, f.p, f.dst), 2.0) <= late[f])]


def _grouped(flows: list[Flow], key) -> dict:
    groups = defaultdict(list)
    for f in checked(flows):
        groups[key(f)].append(f)
    return groups


def prepare(problem: Problem, arch: Architecture) -> Prepared:
    """The sets and parameters of the formulation for ``arch`` (data only: no model yet)."""
    pools, instances, decode, agg, notes = candidate_pools(problem, arch)
    check_build_deadline()
    secs: dict[tuple, list[float]] = {}  # per P instance (chip, shape): the same in every datacenter
    for p in pools:
        if p.role == P and (p.chip, p.tp) not in secs:
            secs[(p.chip, p.tp)] = _prefill_secs(problem, instances[p])
    bounds = _count_bounds(problem, pools, instances, decode, agg, secs)
    prefill = {(k, p): secs[(p.chip, p.tp)][k] for k in range(len(problem.classes)) for p in pools if p.role == P}
    prefill.update({(k, a): agg[a].service_s(c) for k, c in enumerate(problem.classes) for a in pools
                    if a.role == AGG})  # A: seconds of the prefill budget (the busy of its C14 row)
    flows = _admitted(problem, _flows(problem, arch, pools), pools, instances, agg)
    check_build_deadline()
    ttft, late, hold, eager = _flow_laws(problem, arch, flows, pools, instances, prefill, agg)
    check_build_deadline()
    flows = _undominated(flows, late)
    # a class's WAN bytes depend on DRC and on what the destination's decoders hold (Problem.decode_hit),
    # not on the line's source: priced on a direct route into each datacenter
    wbytes = {(k, drc, d): Route(problem, c, P_MD, "", d, drc).wan_bytes()
              for k, c in enumerate(problem.classes) for drc in (True, False) for d in problem.dc_names}
    return Prepared(
        pools, instances, decode, agg, notes, bounds, flows, prefill, ttft, late, hold, eager, wbytes,
        by_class=_grouped(flows, lambda f: f.k), by_pool=_grouped(flows, lambda f: f.p),
        by_route=_grouped(flows, lambda f: (f.k, f.pipeline, f.dst)), by_link=_grouped(flows, lambda f: (f.src, f.dst)),
    )
