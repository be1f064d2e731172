"""Predicted metrics of a plan, from its pools and per-pool assignments alone.

in:  a :class:`~placer.problem.Problem` and a :class:`~placer.plan.Plan` with
     ``assignments`` (the solver writes them; `evaluate_plan` derives them for a
     hand-written plan)
out: :class:`Analysis`: per-pool utilisation, link use, every flow's TTFT law, and the
     contract metrics (BCR, cost, goodput, TTFT P50/P90/P99, TPOT, WAN, RLD share);
     :func:`pool_usage`: each pool's utilisation and KV memory, for "why this plan".

This module does not use the solver nor the MILP: it takes the flow physics from
:mod:`placer.flows` and recomputes everything at the plan's actual utilisations (the
MILP plans at the caps), so it is also what `validate` and the simulator's agreement
check compare against.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from placer.aggregated import (
    AggDesign, agg_first_token_law, agg_prefill_time_share, at_batch, plan_designs, served_wait_law,
)
from placer.flows import (
    TtftTail, decode_design, eager_tokens, first_token_law, instance, mixture_quantile, packed_wait_law,
    queue_layout, slowest_rdma_peer, wan_bytes, wan_s,
)
from placer.pdd import AGG, D, MD, P, P_A, P_D, P_MD, P_RLD, P_RLD_MD, RELAY_PIPELINES, RLD, streamer_site
from placer.perfmodel import InstanceModel
from placer.queueing import WaitModel
from placer.plan import Assignment, LinkUse, Metrics, Plan
from placer.problem import Class, Problem
from placer.token_cost import token_prices
from placer.ttft_tail import SplitTail

PoolKey = tuple[str, str, str, int]  # role, dc, chip, tp


@dataclass
class DecodeState:
    count: int
    im: InstanceModel
    tokens_per_s: float = 0.0  # per instance
    context_weighted: float = 0.0
    batch: float = 0.0
    step_s: float = 0.0
    overloaded: bool = False
    agg: AggDesign | None = None  # A pools: the design (chunk) its steps carry; steps are mixed steps

    def step_at(self, batch: float, context_tokens: float) -> float:
        """Seconds of one step at ``batch``: a decode step, or (A) a mixed step with a full chunk."""
        if self.agg is None:
            return self.im.step_s(batch, context_tokens)
        return self.im.mixed_step_s(batch, context_tokens, self.agg.chunk_tokens, self.agg.chunk_start_tokens)


@dataclass
class FlowLaw:
    """TTFT of one flow = deterministic part + the P pool's waiting time (+ a WAN transfer's slowdown)."""

    request_class: str
    pipeline: str
    p_pool: PoolKey
    dst: str
    rps: float
    det_s: float
    wait: TtftTail | SplitTail
    meets_tpot: bool

    def prob_late(self, budget_s: float) -> float:
        return 1.0 if not self.meets_tpot else self.wait.prob_exceeds(budget_s - self.det_s)


@dataclass
class Analysis:
    metrics: Metrics
    p_utilization: dict[PoolKey, float]
    decode: dict[PoolKey, DecodeState]
    link_gbit: dict[tuple[str, str], float]
    flows: list[FlowLaw]
    rld_tokens_per_s: float
    total_tokens_per_s: float
    problems: list[str] = field(default_factory=list)


def _key(a: Assignment) -> PoolKey:
    return (a.role, a.datacenter, a.chip, a.tp)


def _ignored(a: Assignment) -> str:
    return (f"ignored {a.rps:.2g} req/s of {a.request_class} assigned to {_label(_key(a))}, "
            "which has no instances")


def _link_use(problem: Problem, plan: Plan, classes: dict[str, Class]) -> tuple[dict, dict]:
    """Gbit/s on every line the routes cross, and its share of the line (inf on a missing line)."""
    link_gbit: dict[tuple[str, str], float] = defaultdict(float)
    for r in plan.routes:
        if r.src != r.dst and r.rps > 0:
            drc = problem.options.drc and r.pipeline != P_D
            link_gbit[(r.src, r.dst)] += r.rps * wan_bytes(problem, classes[r.request_class], drc) * 8 / 1e9
    link_util = {}
    for key, used in link_gbit.items():
        link = problem.links.get(key)
        link_util[key] = used / link.gbit_per_s if link and link.gbit_per_s > 0 else math.inf
    return link_gbit, link_util


def line_residuals_s(problem: Problem, plan: Plan, classes: dict[str, Class]) -> dict[tuple[str, str], float]:
    """Each used line's mean residual transfer E[S²]/(2E[S]), seconds at its full rate, over the KV
    transfers the plan's routes send across it (what :func:`placer.flows.first_token_law` spreads by)."""
    first: dict[tuple[str, str], float] = defaultdict(float)
    second: dict[tuple[str, str], float] = defaultdict(float)
    for r in plan.routes:
        link = problem.links.get((r.src, r.dst))
        if r.src == r.dst or r.rps <= 0 or link is None or link.bytes_per_s <= 0:
            continue
        drc = problem.options.drc and r.pipeline != P_D
        size_s = wan_bytes(problem, classes[r.request_class], drc) / link.bytes_per_s
        first[(r.src, r.dst)] += r.rps * size_s
        second[(r.src, r.dst)] += r.rps * size_s * size_s
    return {key: second[key] / (2 * s1) for key, s1 in first.items() if s1 > 0}


def _line_utilization(link_util: dict[tuple[str, str], float], src: str, dst: str) -> float:
    """The utilisation a transfer over src→dst sees (kept below 1 so it stays finite)."""
    return min(link_util.get((src, dst), 0.0), 0.999)


def _decode_tokens(problem: Problem, a: Assignment, c: Class, link_util: dict,
                   im: InstanceModel) -> tuple[float, float]:
    """Tokens one request of ``a`` decodes on its pool ``im``, and its mean resident context
    (RLD on P-RLD-MD: one per step of its design batch while the KV crosses)."""
    if a.role == RLD:
        if a.pipeline == P_RLD:
            tokens = float(c.output_tokens)
        else:
            src, dst = a.datacenter, a.dst or a.datacenter
            wan = wan_s(problem, c, P_RLD_MD, src, dst, problem.options.drc, _line_utilization(link_util, src, dst))
            tokens = eager_tokens(wan, c.output_tokens, decode_design(problem, im)[1])
        return tokens, c.input_tokens + tokens / 2
    return float(c.output_tokens), c.input_tokens + c.output_tokens / 2


def _load_decode(problem: Problem, plan: Plan, classes: dict[str, Class], decode: dict[PoolKey, DecodeState],
                 link_util: dict, notes: list[str]) -> float:
    """Add every decode assignment's tokens/s and context to its pool; return RLD's tokens/s."""
    rld_tokens = 0.0
    for a in plan.assignments:
        if a.role == P or a.rps <= 0:
            continue
        if _key(a) not in decode:  # solver noise on a pool that got no instances
            notes.append(_ignored(a))
            continue
        tokens, resident = _decode_tokens(problem, a, classes[a.request_class], link_util, decode[_key(a)].im)
        if a.role == RLD:
            rld_tokens += a.rps * tokens
        st = decode[_key(a)]
        rate = a.rps * tokens / st.count
        st.tokens_per_s += rate
        st.context_weighted += rate * resident
    return rld_tokens


def _settle_batch(problem: Problem, key: PoolKey, st: DecodeState, notes: list[str]) -> None:
    """The decode batch by Little's law, B = tokens/s per instance × step(B), and its step time."""
    ctx = st.context_weighted / st.tokens_per_s
    batch = 1.0
    for _ in range(200):
        nxt = st.tokens_per_s * st.step_at(batch, ctx)
        if nxt > st.im.batch_cap:
            st.overloaded, batch = True, float(st.im.batch_cap)
            break
        if abs(nxt - batch) < 1e-6:
            break
        batch = nxt
    st.batch = max(batch, 1.0)
    st.step_s = st.step_at(st.batch, ctx)
    if st.overloaded or st.step_s > problem.tpot_s * 1.0001:
        notes.append(f"decode pool {_label(key)}: step {st.step_s:.4f} s at batch "
                     f"{st.batch:.0f} exceeds TPOT {problem.tpot_s} s")


def _meets_tpot(problem: Problem, decode: dict[PoolKey, DecodeState], role: str, dc: str) -> bool:
    """Whether every busy ``role`` pool in ``dc`` steps within the TPOT SLA."""
    return all(s.step_s <= problem.tpot_s * 1.0001 for k, s in decode.items()
               if k[0] == role and k[1] == dc and s.tokens_per_s > 0)


def _flow_law(problem: Problem, a: Assignment, c: Class, im: InstanceModel, decode: dict[PoolKey, DecodeState],
              link_util: dict, waits: dict[tuple, list[InstanceWait]],
              residuals: dict[tuple[str, str], float]) -> FlowLaw:
    """The TTFT law of one P assignment (:func:`placer.flows.first_token_law`): prefill + KV to the
    decoder that streams t0 (which streams it on import), the wait of the instances its queue
    sends it to (:func:`p_instance_laws`) and the line's slowdown."""
    key = _key(a)
    dst = a.dst or a.datacenter
    site = streamer_site(a.pipeline or P_MD, a.datacenter, dst)
    peer = slowest_rdma_peer(s.im for k, s in decode.items() if (k[0], k[1]) == site and s.tokens_per_s > 0)
    parts = []
    for part in waits[(*key, a.queue or "")]:
        det, tail = first_token_law(problem, im, c, a.pipeline or P_MD, a.datacenter, dst, problem.options.drc,
                                    _line_utilization(link_util, a.datacenter, dst), peer, part.law,
                                    part.line_shares.get(dst, 0.0), residuals.get((a.datacenter, dst)), packed=True)
        parts.append((part.weight, tail))
    if len(parts) > 1:
        tail = SplitTail(tuple(parts))
    if a.pipeline in RELAY_PIPELINES:
        ok = _meets_tpot(problem, decode, RLD, a.datacenter)
    else:
        ok = _meets_tpot(problem, decode, MD if a.pipeline == P_MD else D, dst)
    if a.pipeline == P_RLD_MD:
        ok = ok and _meets_tpot(problem, decode, MD, dst)
    return FlowLaw(c.name, a.pipeline or P_MD, key, dst, a.rps, det, tail, ok)


def _ttft_quantiles(flows: list[FlowLaw]) -> dict[str, float]:
    """TTFT P50, P90 and P99 over the flows' requests mixed by rate (the Metrics keys)."""
    return {f"ttft_p{round(100 * q)}_s": mixture_quantile(flows, q) for q in (0.50, 0.90, 0.99)}


def _metrics(problem: Problem, flows: list[FlowLaw], cost: float, decode: dict[PoolKey, DecodeState],
             link_gbit: dict, rld_tokens: float, total_tokens: float, prices) -> Metrics:
    served = sum(f.rps for f in flows)
    late = sum(f.rps * f.prob_late(problem.ttft_p90_s) for f in flows)
    goodput = served - late
    steps = [(s.step_s, s.tokens_per_s * s.count) for k, s in decode.items() if k[0] != RLD and s.tokens_per_s > 0]
    tpot = sum(t * w for t, w in steps) / sum(w for _, w in steps) if steps else 0.0
    return Metrics(
        bcr_requests_per_usd=goodput * 3600 / cost if cost > 0 else 0.0,
        cost_usd_per_h=cost,
        goodput_rps=goodput,
        **_ttft_quantiles(flows),
        tpot_s=tpot,
        wan_gbit_per_s=sum(link_gbit.values()),
        rld_token_share=rld_tokens / total_tokens if total_tokens > 0 else 0.0,
        served_rps=served,
        offered_rps=problem.arrival_rps,
        sla_attainment=goodput / served if served > 0 else 0.0,
        usd_per_million_input_tokens=prices.usd_per_million_input_tokens,
        usd_per_million_cached_input_tokens=prices.usd_per_million_cached_input_tokens,
        usd_per_million_output_tokens=prices.usd_per_million_output_tokens,
    )


def analyze(problem: Problem, plan: Plan) -> Analysis:
    """Metrics of ``plan`` (which must carry assignments) at its actual utilisations."""
    classes = {c.name: c for c in problem.classes}
    counts = {(p.role, p.datacenter, p.chip, p.tp): p.count for p in plan.pools if p.count > 0}
    models = {key: instance(problem, key[2], key[3]) for key in counts}
    notes: list[str] = []
    link_gbit, link_util = _link_use(problem, plan, classes)
    # P queues: utilisation and waiting-time law (a pool without queue split is one queue)
    waits = p_queue_laws(problem, plan, counts, models)
    p_util = {key: law.rho for key, law in waits.items()}

    decode = {key: DecodeState(cnt, models[key]) for key, cnt in counts.items() if key[0] != P}
    for key, design in plan_designs(problem, plan, models).items():
        decode[key].agg = design
    rld_tokens = _load_decode(problem, plan, classes, decode, link_util, notes)
    total_tokens = 0.0
    for r in plan.routes:
        total_tokens += r.rps * classes[r.request_class].output_tokens
    for key, st in decode.items():
        if st.tokens_per_s > 0:
            _settle_batch(problem, key, st, notes)

    agg_laws = a_queue_laws(problem, plan, counts, decode)
    residuals = line_residuals_s(problem, plan, classes)
    flows = _agg_flows(problem, plan, classes, decode, agg_laws)
    served_waits = p_instance_laws(problem, plan, counts, models)
    for a in plan.assignments:
        if a.role != P or a.rps <= 0:
            continue
        if _key(a) not in models:  # solver noise on a pool that got no instances
            notes.append(_ignored(a))
            continue
        flows.append(_flow_law(problem, a, classes[a.request_class], models[_key(a)], decode, link_util,
                               served_waits, residuals))

    cost = sum(models[k].price_usd_per_h * cnt for k, cnt in counts.items())
    prices = token_prices(problem, plan, models, _agg_prefill_shares(counts, agg_laws))
    metrics = _metrics(problem, flows, cost, decode, link_gbit, rld_tokens, total_tokens, prices)
    for key, (_, law, _) in agg_laws.items():
        p_util[key] = law.rho
    for key, rho in p_util.items():
        if rho >= 1.0:
            notes.append(f"prefill pool {_label(key[:4])} queue {key[4] or 'all'} is overloaded "
                         f"(utilisation {rho:.2f})")
    return Analysis(metrics, p_util, decode, dict(link_gbit), flows, rld_tokens, total_tokens, notes)


def p_queue_laws(problem: Problem, plan: Plan, counts: dict, models: dict) -> dict[tuple, WaitModel]:
    """M/G/1 law of every P queue, keyed (role, dc, chip, tp, queue), from the plan's own mix.

    Queues come from the assignments' ``queue``/``queue_instances``; a pool whose
    assignments name no queue is one queue over all its instances. Short prompts share
    forwards when they queue behind each other (see :func:`placer.flows.packed_wait_law`).
    """
    classes = {c.name: c for c in problem.classes}
    load: dict[tuple, list[tuple[float, float, float]]] = defaultdict(list)
    share: dict[tuple, float] = {}
    for a in plan.assignments:
        if a.role != P or a.rps <= 0 or _key(a) not in models:
            continue
        key = (*_key(a), a.queue or "")
        c = classes[a.request_class]
        load[key].append((a.rps, models[_key(a)].prefill_s(c.input_tokens, c.hit_rate), _new_tokens(c)))
        share[key] = a.queue_instances if a.queue_instances is not None else counts[_key(a)]
    return {key: packed_wait_law(items, share[key], models[key[:4]]) for key, items in load.items()}


@dataclass(frozen=True)
class InstanceWait:
    """What a P queue's requests meet at one of its instances: ``weight``, the share of the queue's
    requests sent there; ``law``, that instance's wait; ``line_shares``, dst → the share of the
    instance's requests whose KV crosses the line to dst (:func:`placer.flows.line_batchmates`)."""

    weight: float
    law: WaitModel
    line_shares: dict[str, float]


def p_instance_laws(problem: Problem, plan: Plan, counts: dict, models: dict) -> dict[tuple, list[InstanceWait]]:
    """The waits a P queue's requests meet, keyed (role, dc, chip, tp, queue): one
    :class:`InstanceWait` per instance that serves the queue.

    :func:`p_queue_laws` takes each queue of the plan as a queue of its own on its
    ``queue_instances``; on the hardware an instance has ONE first-come-first-served queue,
    and where the plan's queues share an instance (fractional ``queue_instances``) their
    requests wait behind each other and share its forwards. Here the queues are laid on the
    instances (:func:`placer.flows.queue_layout`), each instance takes the classes its queues
    send it (random splits of Poisson streams stay Poisson), and its law is
    :func:`placer.flows.packed_wait_law` of that mix on one instance; instances a queue owns
    alone give its own law. Without queue figures a pool is one queue over its instances.
    This is the prediction (`analyze`); `validate` checks the plan by the planning rule,
    :func:`p_queue_laws`."""
    classes = {c.name: c for c in problem.classes}
    by_pool: dict[PoolKey, list[Assignment]] = defaultdict(list)
    for a in plan.assignments:
        if a.role == P and a.rps > 0 and _key(a) in models:
            by_pool[_key(a)].append(a)
    out: dict[tuple, list[InstanceWait]] = {}
    for key, rows in by_pool.items():
        count, im = counts[key], models[key]
        queues = {a.queue or "": a.queue_instances for a in rows}
        if any(n is None for n in queues.values()):  # no queue figures: every instance alike
            layout = {q: [(0, 1.0)] for q in queues}
            served = float(count)
        else:
            layout = queue_layout(queues, count)
            served = 1.0
        load: dict[int, list] = defaultdict(list)  # instance → (req/s, prefill s, new tokens)
        crossing: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for a in rows:
            c = classes[a.request_class]
            for i, w in layout[a.queue or ""]:
                load[i].append((a.rps * w, im.prefill_s(c.input_tokens, c.hit_rate), _new_tokens(c)))
                if a.dst and a.dst != a.datacenter:
                    crossing[i][a.dst] += a.rps * w
        waits, laws = {}, {}  # instances a queue owns alone carry the same load: one law for them all
        for i, items in load.items():
            total = sum(r for r, _, _ in items)
            if tuple(items) not in laws:
                laws[tuple(items)] = packed_wait_law(items, served, im)
            waits[i] = (laws[tuple(items)], {d: r / total for d, r in crossing[i].items()})
        for q, parts in layout.items():
            out[(*key, q)] = [InstanceWait(w, *waits[i]) for i, w in parts]
    return out


def _new_tokens(c: Class) -> float:
    """Tokens a prompt of class ``c`` prefills (at least one)."""
    return max(1.0, (1.0 - c.hit_rate) * c.input_tokens)


def a_queue_laws(problem: Problem, plan: Plan, counts: dict,
                 decode: dict[PoolKey, DecodeState]) -> dict[tuple, tuple[AggDesign, WaitModel, float]]:
    """(design at the settled batch, M/G/1 law of the prefill budget, instances) of every A queue, keyed
    (role, dc, chip, tp, queue), from the plan's own mix (:func:`placer.aggregated.served_wait_law`)."""
    classes = {c.name: c for c in problem.classes}
    items: dict[tuple, list] = defaultdict(list)
    share: dict[tuple, float] = {}
    for a in plan.assignments:
        if a.role != AGG or a.rps <= 0 or _key(a) not in decode:
            continue
        key = (*_key(a), a.queue or "")
        items[key].append((a.rps, classes[a.request_class]))
        share[key] = a.queue_instances if a.queue_instances is not None else counts[_key(a)]
    out = {}
    for key, its in items.items():
        st = decode[key[:4]]
        design = at_batch(st.agg, st.batch) if st.tokens_per_s > 0 else st.agg
        out[key] = (design, served_wait_law(design, its, share[key]), share[key])
    return out


def _agg_prefill_shares(counts: dict, laws: dict) -> dict[PoolKey, float]:
    """Each A pool's share of its time spent on prefill chunks: its queues' busy budget (ρ × the
    queue's instances, summed) over its instances, priced at its design's marginal chunk time."""
    busy: dict[PoolKey, float] = defaultdict(float)
    design: dict[PoolKey, AggDesign] = {}
    for key, (d, law, instances) in laws.items():
        busy[key[:4]] += law.rho * instances
        design[key[:4]] = d
    return {key: agg_prefill_time_share(design[key], busy[key] / counts[key]) for key in busy}


def _agg_flows(problem: Problem, plan: Plan, classes: dict[str, Class], decode: dict[PoolKey, DecodeState],
               laws: dict) -> list[FlowLaw]:
    """The TTFT law of every A assignment: ⌈n/C⌉ steps at the settled batch, the budget's wait."""
    flows = []
    for a in plan.assignments:
        key = (*_key(a), a.queue or "")
        if a.role != AGG or key not in laws:
            continue
        design, law, _ = laws[key]
        det, tail = agg_first_token_law(design, classes[a.request_class], law)
        ok = decode[_key(a)].step_s <= problem.tpot_s * 1.0001
        flows.append(FlowLaw(a.request_class, P_A, _key(a), a.datacenter, a.rps, det, tail, ok))
    return flows


def _label(key: PoolKey) -> str:
    return f"{key[0]} {key[1]} {key[2]} tp{key[3]}"


def link_uses(problem: Problem, analysis: Analysis) -> list[LinkUse]:
    """Every line of the scenario with its planned Gbit/s (0 when unused)."""
    out = []
    for (s, d), link in sorted(problem.links.items()):
        out.append(LinkUse(src=s, dst=d, gbit_per_s_used=round(analysis.link_gbit.get((s, d), 0.0), 6),
                           gbit_per_s_capacity=link.gbit_per_s))
    return out


@dataclass
class PoolUsage:
    """One pool's load at the plan's rates: ``utilization`` is P's busy fraction (its
    busiest queue) or a decode pool's batch over its design batch (TPOT and memory);
    KV memory is per instance (a P pool holds one prompt's KV at a time per forward)."""

    role: str
    datacenter: str
    chip: str
    tp: int
    count: int
    utilization: float
    kv_gib_used: float
    kv_gib_capacity: float


def pool_usage(problem: Problem, plan: Plan) -> list[PoolUsage]:
    """Utilisation and KV memory of every pool with instances (needs the plan's assignments)."""
    analysis = analyze(problem, plan)
    classes = {c.name: c for c in problem.classes}
    gib = 2.0 ** 30
    out = []
    for pool in plan.pools:
        key = (pool.role, pool.datacenter, pool.chip, pool.tp)
        if pool.count <= 0:
            continue
        im = instance(problem, pool.chip, pool.tp)
        if pool.role == P:
            util = max((rho for k, rho in analysis.p_utilization.items() if k[:4] == key), default=0.0)
            longest = max((classes[a.request_class].input_tokens for a in plan.assignments
                           if _key(a) == key and a.rps > 0), default=0)
            kv_used = longest * problem.kv_bytes_per_token
        else:
            st = analysis.decode.get(key)
            busy = st is not None and st.tokens_per_s > 0
            design = decode_design(problem, im)[0] if busy else 0
            util = st.batch / design if busy and design > 0 else 0.0
            ctx = st.context_weighted / st.tokens_per_s if busy else 0.0
            kv_used = (st.batch * ctx * problem.kv_bytes_per_token) if busy else 0.0
        out.append(PoolUsage(pool.role, pool.datacenter, pool.chip, pool.tp, pool.count, util,
                             kv_used / gib, max(im.kv_capacity_bytes, 0.0) / gib))
    return out


# --- fleets: one plan per model, shared hardware ------------------------------------------

def _weighted(values: list[tuple[float | None, float]]) -> float | None:
    """Σ value·weight / Σ weight over the defined values (None when none is)."""
    known = [(v, w) for v, w in values if v is not None and w > 0]
    total = sum(w for _, w in known)
    return sum(v * w for v, w in known) / total if total > 0 else None


def _input_tokens_per_s(problem: Problem, plan: Plan) -> tuple[float, float]:
    """(uncached, cached) prompt tokens per second the plan's routes carry."""
    classes = {c.name: c for c in problem.classes}
    new = sum(r.rps * classes[r.request_class].new_tokens for r in plan.routes)
    full = sum(r.rps * classes[r.request_class].input_tokens for r in plan.routes)
    return new, full - new


def fleet_metrics(parts: list[tuple[Problem, Plan]]) -> Metrics:
    """The fleet's metrics from each model's (problem, plan): cost, goodput, served and offered
    load and WAN Gbit/s summed; BCR = Σ goodput·3600 / Σ cost; TTFT quantiles over every model's
    requests mixed by rate; TPOT and the RLD share weighted by output tokens/s; USD per million
    tokens weighted by each model's tokens/s of that kind (= Σ cost of the phase / Σ tokens)."""
    analyses = [(problem, plan, analyze(problem, plan)) for problem, plan in parts]
    ms = [a.metrics for _, _, a in analyses]
    flows = [f for _, _, a in analyses for f in a.flows]
    out_tokens = [a.total_tokens_per_s for _, _, a in analyses]
    inputs = [_input_tokens_per_s(problem, plan) for problem, plan, _ in analyses]
    cost, goodput, served = (sum(getattr(m, k) for m in ms) for k in ("cost_usd_per_h", "goodput_rps", "served_rps"))
    return Metrics(
        bcr_requests_per_usd=goodput * 3600 / cost if cost > 0 else 0.0,
        cost_usd_per_h=cost,
        goodput_rps=goodput,
        **_ttft_quantiles(flows),
        tpot_s=_weighted([(m.tpot_s, w) for m, w in zip(ms, out_tokens)]) or 0.0,
        wan_gbit_per_s=sum(m.wan_gbit_per_s for m in ms),
        rld_token_share=sum(a.rld_tokens_per_s for _, _, a in analyses) / sum(out_tokens) if sum(out_tokens) else 0.0,
        served_rps=served,
        offered_rps=sum(m.offered_rps for m in ms),
        sla_attainment=goodput / served if served > 0 else 0.0,
        usd_per_million_input_tokens=_weighted(
            [(m.usd_per_million_input_tokens, w[0]) for m, w in zip(ms, inputs)]),
        usd_per_million_cached_input_tokens=_weighted(
            [(m.usd_per_million_cached_input_tokens, w[1]) for m, w in zip(ms, inputs)]),
        usd_per_million_output_tokens=_weighted(
            [(m.usd_per_million_output_tokens, w) for m, w in zip(ms, out_tokens)]),
    )
