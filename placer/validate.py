"""Independent re-check of a plan without the solver.

in:  a Problem and a Plan with assignments
out: a list of human-readable violations (empty = valid)

Checks, each from the performance model and :mod:`placer.flows` directly (not from the
MILP's rows), one function per family: names known, weights fit, inventory and power
per datacenter, cost = Σ count·tp·price, routes carry the class mix and agree with the
per-pool assignments, P capacity and memory, decode slots and memory, aggregated (A)
pools' prefill budget, slots and memory (placer.aggregated), every pipeline's roles
present, link bandwidth, P and A queue shares, and the P90 TTFT attainment.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from placer.aggregated import AggDesign, agg_design, agg_first_token_law, plan_designs, served_wait_law
from placer.decode_slots import StepRow
from placer.flows import (
    Route, class_kv_weight, decode_context_tokens, decode_design, decode_kv_headroom, eager_tokens, instance,
    relay_room_factor, slowest_rdma_peer,
)
from placer.pdd import (
    AGG, PREFILL_ROLES, D, MD, P, P_D, P_MD, P_RLD, P_RLD_MD, RLD, SLA_QUANTILE, queue_chunk_tokens, streamer_site,
)
from placer.perfmodel import InstanceModel
from placer.fleetplan import split_plan
from placer.plan import Plan, PoolKey
from placer.problem import Class, FleetProblem, Problem
from placer.queue_laws import p_queue_laws

REL_TOL = 1e-4


def _over(used: float, limit: float) -> bool:
    return used > limit * (1 + REL_TOL) + 1e-9


@dataclass(frozen=True)
class _Checked:
    """The plan under check with what every family needs: its pools' counts and instance models."""

    problem: Problem
    plan: Plan
    classes: dict[str, Class]
    counts: dict[PoolKey, int]
    models: dict[PoolKey, InstanceModel]


def _unknown_names(problem: Problem, counts: dict[PoolKey, int]) -> list[str]:
    issues = []
    known_dcs = set(problem.dc_names)
    for role, dc, chip, tp in counts:
        if dc not in known_dcs:
            issues.append(f"pool {role} {dc} {chip} tp{tp}: unknown datacenter")
        if chip not in problem.chips:
            issues.append(f"pool {role} {dc} {chip} tp{tp}: unknown chip")
    return issues


def _fits(s: _Checked) -> list[str]:
    """Every pool's chip runs the dtypes (fp4 needs an fp4 rate); weights plus the longest request's
    context fit in its instance."""
    longest = max(c.input_tokens + c.output_tokens for c in s.problem.classes)
    unsupported = [f"{_pool(key)}: {im.unsupported}" for key, im in s.models.items() if im.unsupported]
    return unsupported or [f"{_pool(key)}: weights + a {longest}-token context do not fit"
                           for key, im in s.models.items() if not im.fits(longest)]


def _pool(key: PoolKey) -> str:
    return f"pool {key.role} {key.datacenter} {key.chip} tp{key.tp}"


def _inventory_power(s: _Checked) -> list[str]:
    """Chips and power per datacenter within their limits."""
    issues = []
    chips_used: dict[tuple[str, str], int] = defaultdict(int)
    power: dict[str, float] = defaultdict(float)
    for key, count in s.counts.items():
        chips_used[(key.datacenter, key.chip)] += count * key.tp
        power[key.datacenter] += count * s.models[key].power_kw
    for (dc, chip), used in chips_used.items():
        have = s.problem.dc(dc).inventory.get(chip, 0)
        if used > have:
            issues.append(f"inventory {dc} {chip}: plan uses {used}, datacenter has {have}")
    for dc, kw in power.items():
        limit = s.problem.dc(dc).power_kw
        if limit is not None and _over(kw, limit):
            issues.append(f"power {dc}: plan draws {kw:.1f} kW, limit {limit:.1f} kW")
    return issues


def _cost(s: _Checked) -> list[str]:
    """The metrics' cost = Σ count·price."""
    issues = []
    cost = sum(s.models[k].price_usd_per_h * c for k, c in s.counts.items())
    if abs(cost - s.plan.metrics.cost_usd_per_h) > 1e-6 * max(1.0, cost):
        issues.append(f"cost: metrics say {s.plan.metrics.cost_usd_per_h:.4f} USD/h, pools cost {cost:.4f}")
    return issues


def _routes(s: _Checked) -> tuple[list[str], float]:
    """Routes carry the class mix, no more than the offered load, over existing lines, and agree
    with the P assignments; also returns the req/s they carry."""
    issues = []
    problem, classes = s.problem, s.classes
    by_class = defaultdict(float)
    for r in s.plan.routes:
        if r.request_class not in classes:
            issues.append(f"route: unknown request class {r.request_class!r}")
            continue
        by_class[r.request_class] += r.rps
        if r.src != r.dst and (r.src, r.dst) not in problem.links:
            issues.append(f"route {r.request_class} {r.pipeline}: no link {r.src}->{r.dst}")
        if r.pipeline == P_RLD and not classes[r.request_class].filterable:
            issues.append(f"route {r.request_class}: P-RLD is for filtered (long, low-hit, short) classes only")
    served = sum(by_class.values())
    for name, c in classes.items():
        if abs(by_class[name] - c.share * served) > 1e-6 * max(1.0, served):
            issues.append(f"routes carry {by_class[name]:.4f} rps of {name}, the mix needs {c.share * served:.4f}")
    if served > problem.arrival_rps * (1 + 1e-6):
        issues.append(f"routes carry {served:.4f} rps, more than the offered {problem.arrival_rps}")
    p_by_route = defaultdict(float)
    for a in s.plan.assignments:
        if a.role in PREFILL_ROLES:
            p_by_route[(a.request_class, a.pipeline, a.datacenter, a.dst or a.datacenter)] += a.rps
    for r in s.plan.routes:
        got = p_by_route.get((r.request_class, r.pipeline, r.src, r.dst), 0.0)
        if abs(got - r.rps) > 1e-6 * max(1.0, r.rps):
            issues.append(f"route {r.request_class} {r.pipeline} {r.src}->{r.dst}: {r.rps:.4f} rps but "
                          f"prefill assignments carry {got:.4f}")
    return issues, served


def _unknown_pools(s: _Checked) -> list[str]:
    return [f"assignment of {a.request_class} to pool {a.role} {a.datacenter} {a.chip} tp{a.tp}, "
            "which the plan does not have"
            for a in s.plan.assignments if a.key not in s.counts]


def _route(s: _Checked, a, pipeline: str) -> Route:
    """The flow of P assignment ``a`` on ``pipeline``, its RDMA copy priced at the slowest-NIC decoder of
    the plan where its first token is streamed."""
    dst = a.dst or a.datacenter
    site = streamer_site(a.pipeline or P_MD, a.datacenter, dst)
    peer = slowest_rdma_peer(s.models[k] for k in s.counts if (k.role, k.datacenter) == site)
    return Route(s.problem, s.classes[a.request_class], pipeline, a.datacenter, dst, s.problem.options.drc,
                 s.models[a.key], peer)


def _prefill(s: _Checked) -> list[str]:
    """P capacity (busy seconds ≤ cap × instances) and memory (KV staged by Little's law)."""
    opts, kv = s.problem.options, s.problem.kv_bytes_per_token
    p_work, p_mem = defaultdict(float), defaultdict(float)
    for a in s.plan.assignments:
        if a.role != P:
            continue
        key = a.key
        c, im = s.classes[a.request_class], s.models[key]
        pre = im.prefill_s(c.input_tokens, c.hit_rate)
        p_work[key] += a.rps * pre
        staged = _route(s, a, a.pipeline).staged_kv_s(opts.link_utilization_cap)
        p_mem[key] += a.rps * (pre + staged) * c.input_tokens * kv
    issues = []
    u = opts.utilization_cap
    for key, work in p_work.items():
        if _over(work, u * s.counts[key]):
            issues.append(f"prefill pool {key.datacenter} {key.chip} tp{key.tp}: {work:.3f} busy-seconds/s exceed "
                          f"{u} × {s.counts[key]} instances")
        if _over(p_mem[key], s.models[key].kv_capacity_bytes * s.counts[key]):
            issues.append(f"prefill pool {key.datacenter} {key.chip} tp{key.tp}: staged KV exceeds memory")
    return issues


def _decode(s: _Checked) -> list[str]:
    """Decode slots and memory at the design batch (the largest meeting TPOT at the mix's context and holding
    its KV), and the step its own classes make within TPOT (the step row, :mod:`placer.decode_slots`)."""
    problem, opts, kv = s.problem, s.problem.options, s.problem.kv_bytes_per_token
    issues, slots, steps, dmem, limits = [], defaultdict(float), defaultdict(float), defaultdict(float), {}
    ctx, rows = decode_context_tokens(problem.classes), {}
    for a in (a for a in s.plan.assignments if a.role not in PREFILL_ROLES):
        key, c, im = a.key, s.classes[a.request_class], s.models[a.key]
        batch, step = decode_design(problem, im)
        if batch < 1:
            issues.append(f"decode pool {a.role} {a.datacenter} {a.chip} tp{a.tp} cannot meet TPOT {problem.tpot_s} s")
            continue
        headroom = decode_kv_headroom(problem, im)
        weight = class_kv_weight(headroom, c)  # the reserved KV with its occupancy headroom
        tokens, relayed = c.output_tokens, a.role == RLD and a.pipeline == P_RLD_MD  # relayed: held for its line
        if relayed:
            wan = Route(problem, c, a.pipeline, a.datacenter, a.dst, opts.drc).wan_s(opts.link_utilization_cap)
            tokens = eager_tokens(wan, c.output_tokens, step)
            weight *= relay_room_factor(opts.link_utilization_cap)
        slots[key] += a.rps * tokens * step / batch
        row = rows.get(key) or rows.setdefault(key, StepRow.at_mix(im, ctx, problem.tpot_s, opts.utilization_cap, step))
        steps[key] += a.rps * (row.share(c, tokens * step, tokens) if relayed else row.share(c, tokens * row.limit_s))
        dmem[key] += a.rps * tokens * step * weight * kv
        limits[key] = headroom.limit_tokens * kv
    for key in slots:
        issues += _slots_and_memory(s, key, f"decode {_pool(key)}", slots[key], dmem[key], limits[key])
        if _over(steps[key], s.counts[key]):
            issues.append(f"decode {_pool(key)}: its classes' contexts need {steps[key]:.3f} instances to step within "
                          f"{rows[key].limit_s:.4f} s (TPOT {problem.tpot_s} s at utilisation {opts.utilization_cap}), "
                          f"has {s.counts[key]}")
    return issues


def _slots_and_memory(s: _Checked, key: PoolKey, label: str, slots: float, kv_byte_s: float,
                      kv_limit_bytes: float | None = None) -> list[str]:
    """A decoding pool's batch slots within the utilisation cap and its resident KV within memory
    (``kv_limit_bytes`` per instance: decode pools' (C7) limit; default the whole KV capacity)."""
    u, issues = s.problem.options.utilization_cap, []
    if _over(slots, u * s.counts[key]):
        issues.append(f"{label}: needs {slots:.3f} instances of batch slots at utilisation {u}, has {s.counts[key]}")
    limit = s.models[key].kv_capacity_bytes if kv_limit_bytes is None else kv_limit_bytes
    if _over(kv_byte_s, limit * s.counts[key]):
        issues.append(f"{label}: resident KV exceeds memory")
    return issues


def _roles_present(s: _Checked) -> list[str]:
    """Every route's pipeline finds its decode roles: RLD beside P, MD or D at the destination."""
    issues = []
    for role_needed, pipes in ((MD, (P_MD, P_RLD_MD)), (RLD, (P_RLD_MD, P_RLD)), (D, (P_D,))):
        for r in s.plan.routes:
            if r.pipeline in pipes and r.rps > 0:
                where = r.src if role_needed == RLD else r.dst
                if not any(k.role == role_needed and k.datacenter == where for k in s.counts):
                    issues.append(f"route {r.request_class} {r.pipeline} needs a {role_needed} pool in {where}")
    return issues


def _line_gbit(problem: Problem, plan: Plan) -> dict[tuple[str, str], float]:
    """Gbit/s each line carries for the plan's routes (this model's KV bytes)."""
    classes, drc = {c.name: c for c in problem.classes}, problem.options.drc
    gbit: dict[tuple[str, str], float] = defaultdict(float)
    for r in plan.routes:
        if r.src != r.dst:
            kv_bytes = Route(problem, classes[r.request_class], r.pipeline, r.src, r.dst, drc).wan_bytes()
            gbit[(r.src, r.dst)] += r.rps * kv_bytes * 8 / 1e9
    return gbit


def _lines_within(problem: Problem, gbit: dict[tuple[str, str], float]) -> list[str]:
    """Lines whose Gbit/s exceed the planned cap (options.link_utilization_cap × line rate)."""
    u_link = problem.options.link_utilization_cap
    issues = []
    for (src, dst), used in gbit.items():
        link = problem.links.get((src, dst))
        if link is not None and _over(used, u_link * link.gbit_per_s):
            issues.append(f"link {src}->{dst}: {used:.3f} Gbit/s over {u_link} × {link.gbit_per_s} Gbit/s")
    return issues


def _queue_shares(s: _Checked) -> list[str]:
    """A P pool's queues use no more instances than the pool has."""
    issues = []
    for key in s.counts:
        if key.role not in PREFILL_ROLES:
            continue
        shares = {a.queue: a.queue_instances for a in s.plan.assignments
                  if a.key == key and a.queue_instances is not None}
        if _over(sum(shares.values()), s.counts[key]):
            kind = "prefill" if key.role == P else "aggregated"
            issues.append(f"{kind} pool {key.datacenter} {key.chip} tp{key.tp}: its queues use "
                          f"{sum(shares.values()):.3f} instances, the pool has {s.counts[key]}")
    return issues


def _a_design(s: _Checked, a, designs: dict) -> AggDesign:
    """The design of ``a``'s A queue: its named chunk, else the pool's (:func:`placer.aggregated.plan_designs`)."""
    chunk = queue_chunk_tokens(a.queue)
    return agg_design(s.problem, s.models[a.key], chunk) if chunk else designs[a.key]


def _aggregated(s: _Checked) -> list[str]:
    """A pools (placer.aggregated): each queue's design meets TPOT; prefill budget and decode
    slots within the utilisation cap × instances; resident KV within memory (Little's law)."""
    problem, u, kv = s.problem, s.problem.options.utilization_cap, s.problem.kv_bytes_per_token
    designs = plan_designs(problem, s.plan, s.models)
    budget, slots, mem, issues = defaultdict(float), defaultdict(float), defaultdict(float), []
    for a in s.plan.assignments:
        if a.role != AGG or a.rps <= 0:
            continue
        key, c = a.key, s.classes[a.request_class]
        design = _a_design(s, a, designs)
        if design.batch < 1:
            issues.append(f"aggregated pool {a.datacenter} {a.chip} tp{a.tp}: no batch meets TPOT "
                          f"{problem.tpot_s} s with {design.chunk_tokens}-token chunks")
            continue
        budget[key] += a.rps * design.service_s(c)
        slots[key] += a.rps * design.decode_s(c) / design.batch
        mem[key] += a.rps * design.resident_byte_s(c, kv)
    for key in budget:
        label = f"aggregated pool {key.datacenter} {key.chip} tp{key.tp}"
        if _over(budget[key], u * s.counts[key]):
            issues.append(f"{label}: prefill budget {budget[key]:.3f} busy-seconds/s exceed {u} × {s.counts[key]}")
        issues += _slots_and_memory(s, key, label, slots[key], mem[key])
    return issues


def _agg_late(s: _Checked) -> float:
    """Req/s of A assignments late for the TTFT SLA, each queue at its own mix and utilisation."""
    designs = plan_designs(s.problem, s.plan, s.models)
    queues: dict[tuple, list] = defaultdict(list)
    for a in s.plan.assignments:
        if a.role == AGG and a.rps > 0:
            queues[(a.key, a.queue or "")].append(a)
    late = 0.0
    for (key, _), members in queues.items():
        design = _a_design(s, members[0], designs)
        share = members[0].queue_instances if members[0].queue_instances is not None else s.counts[key]
        law = served_wait_law(design, [(a.rps, s.classes[a.request_class]) for a in members], share)
        for a in members:
            det, tail = agg_first_token_law(design, s.classes[a.request_class], law)
            late += a.rps * tail.prob_exceeds(s.problem.ttft_p90_s - det)
    return late


def _sla(s: _Checked, served: float) -> list[str]:
    """At most 1 − SLA_QUANTILE of served requests late, each P queue at its own mix and utilisation, by
    the MILP's laws (lines at their cap; the batch-mates of line transfers, :func:`placer.flows.line_batchmates`,
    are in the evaluation's prediction, not in the planning rule)."""
    problem, opts = s.problem, s.problem.options
    laws = p_queue_laws(problem, s.plan, s.counts, s.models)
    late = _agg_late(s)
    for a in s.plan.assignments:
        if a.role != P:
            continue
        law = laws[(*a.key, a.queue or "")]  # the queue's own mix and utilisation
        det, tail = _route(s, a, a.pipeline or P_MD).first_token_law(law, opts.link_utilization_cap)
        late += a.rps * tail.prob_exceeds(problem.ttft_p90_s - det)
    if served > 0 and late > (1 - SLA_QUANTILE) * served * (1 + 1e-4) + 1e-9:
        return [f"SLA: {100 * late / served:.1f} % of requests would miss TTFT {problem.ttft_p90_s} s "
                f"(P90 allows {100 * (1 - SLA_QUANTILE):.0f} %)"]
    return []


def validate(problem: Problem, plan: Plan) -> list[str]:
    """The violations of ``plan`` (empty: valid). Bad names, or assignments to pools the plan
    lacks, stop the check early (the later families would only repeat them)."""
    counts = {p.key: p.count for p in plan.pools if p.count > 0}
    issues = _unknown_names(problem, counts)
    if issues:
        return issues
    s = _Checked(problem, plan, {c.name: c for c in problem.classes}, counts,
                 {key: instance(problem, key.chip, key.tp) for key in counts})
    issues += _fits(s)
    issues += _inventory_power(s) + _cost(s)
    route_issues, served = _routes(s)
    issues += route_issues
    issues += _unknown_pools(s)
    if issues:
        return issues
    for family in (_prefill, _decode, _aggregated, _roles_present):
        issues += family(s)
    issues += _lines_within(problem, _line_gbit(problem, plan))  # each line's Gbit/s within the planned cap
    issues += _queue_shares(s)
    issues += _sla(s, served)
    return issues


def _fleet_checked(fleet: FleetProblem, plan: Plan) -> _Checked | None:
    """The fleet plan with its pools' counts summed over the models (None: unknown names)."""
    shared = fleet.shared
    counts: dict[PoolKey, int] = defaultdict(int)
    for p in plan.pools:
        if p.count > 0:
            counts[p.key] += p.count
    if _unknown_names(shared, counts):
        return None
    return _Checked(shared, plan, {}, dict(counts), {key: instance(shared, key.chip, key.tp) for key in counts})


def shared_hardware_issues(fleet: FleetProblem, plan: Plan) -> list[str]:
    """Chips and power per datacenter, summed over every model's pools, within the datacenter's."""
    s = _fleet_checked(fleet, plan)
    return [] if s is None else _inventory_power(s)


def validate_fleet(fleet: FleetProblem, plan: Plan) -> list[str]:
    """The violations of a fleet plan: each model's own plan by :func:`validate` (prefixed with the
    model's name), then the shared capacities (prefixed "fleet:") — chips and power per datacenter
    summed over every model's pools, each line's Gbit/s summed over every model's routes (each at
    its own KV bytes) — and the fleet's cost = Σ count·price over all pools."""
    parts = split_plan(plan, fleet.names)
    issues = [f"{name}: {issue}" for name, part in parts.items() for issue in validate(fleet.member(name), part)]
    s = _fleet_checked(fleet, plan)
    if s is None:
        return issues
    issues += [f"fleet: {issue}" for issue in _inventory_power(s) + _cost(s)]
    gbit: dict[tuple[str, str], float] = defaultdict(float)
    for name, part in parts.items():
        for line, used in _line_gbit(fleet.member(name), part).items():
            gbit[line] += used
    issues += [f"fleet: {issue}" for issue in _lines_within(fleet.shared, gbit)]
    return issues
