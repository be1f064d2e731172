"""Predicted metrics of a plan, from its pools and per-pool assignments alone.

in:  a :class:`~placer.problem.Problem` and a :class:`~placer.plan.Plan` with
     ``assignments`` (the solver writes them; `evaluate_plan` derives them for a
     hand-written plan)
out: :class:`Analysis`: per-pool utilisation, link use, every flow's TTFT law, and the
     contract metrics (BCR, cost, goodput, TTFT P50/P90/P99, TPOT, WAN, RLD share);
     :func:`link_uses`, :func:`fleet_metrics` (a fleet's metrics from each model's).

This module does not use the solver nor the MILP: it takes the flow physics from
:mod:`placer.flows` (a :class:`~placer.flows.Route` per flow) and the plan's queue laws from
:mod:`placer.queue_laws`, and recomputes everything at the plan's actual utilisations (the
MILP plans at the caps), so it is also what `validate` and the simulator's agreement
check compare against. Each pool's load for "why this plan": :mod:`placer.pool_usage`; the decode
pools' state and batch: :mod:`placer.decode_state` (re-exported here).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from placer.aggregated import agg_first_token_law, plan_designs
from placer.decode_state import (  # noqa: F401 - re-exported: evaluate's decode half lives there
    KV_WAIT_NOTE_SHARE, DecodeState, _hand_over, _ignored, _label, _line_utilization, _load_decode, _meets_tpot,
    _relay_hold_s, _rld_tokens_per_s, _settle_batch, class_kv_waits, site_tpot_late,
)
from placer.flows import Route, TtftTail, instance, slowest_rdma_peer
from placer.line_law import line_stream_utilizations
from placer.p_queues import mixture_quantile
from placer.pdd import AGG, D, MD, P, P_A, P_D, P_MD, P_RLD, P_RLD_MD, RELAY_PIPELINES, RLD, streamer_site
from placer.perfmodel import InstanceModel
from placer.plan import Assignment, LinkUse, Metrics, Plan, PoolKey
from placer.problem import Class, Problem
from placer.queue_laws import (InstanceWait, a_queue_laws, agg_prefill_shares, first_token_by_length, p_instance_laws,
                               p_queue_laws)
from placer.token_cost import token_prices
from placer.ttft_tail import LineLoad, SplitTail


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
    tpot_late: float = 0.0  # share of its requests whose own TPOT exceeds the SLA (decode_state.site_tpot_late)

    def prob_late(self, budget_s: float) -> float:
        return 1.0 if not self.meets_tpot else self.wait.prob_exceeds(budget_s - self.det_s)

    def prob_lost(self, budget_s: float) -> float:
        """The share of its requests out of goodput: late first token, or a TPOT of its own over the SLA (the
        simulator's and the executor's count; independent: one is the P side's, the other the decoder's batch)."""
        return 1.0 - (1.0 - self.prob_late(budget_s)) * (1.0 - self.tpot_late)


@dataclass
class Analysis:
    metrics: Metrics
    p_utilization: dict[tuple, float]  # (role, dc, chip, tp, queue) -> utilisation
    decode: dict[PoolKey, DecodeState]
    link_gbit: dict[tuple[str, str], float]
    flows: list[FlowLaw]
    rld_tokens_per_s: float
    total_tokens_per_s: float
    problems: list[str] = field(default_factory=list)


def line_gbit(problem: Problem, plan: Plan) -> dict[tuple[str, str], float]:
    """Gbit/s of KV on every line ``plan``'s routes cross (:func:`flows_gbit`)."""
    classes = {c.name: c for c in problem.classes}
    return flows_gbit(problem, ((classes[r.request_class], r.pipeline, r.src, r.dst, r.rps) for r in plan.routes))


def flows_gbit(problem: Problem, flows: Iterable[tuple[Class, str, str, str, float]]) -> dict[tuple[str, str], float]:
    """Gbit/s of KV on every line ``flows`` ((class, pipeline, src, dst, req/s) each: a plan's routes, an LP's flows)
    cross, each request's at :meth:`Route.wan_bytes` (what the destination's decoders lack: ``problem``'s decode-side
    hits)."""
    link_gbit: dict[tuple[str, str], float] = defaultdict(float)
    for c, pipeline, src, dst, rps in flows:
        if src != dst and rps > 0:
            kv_bytes = Route(problem, c, pipeline, src, dst, problem.options.drc).wan_bytes()
            link_gbit[(src, dst)] += rps * kv_bytes * 8 / 1e9
    return dict(link_gbit)


def _link_use(problem: Problem, plan: Plan) -> tuple[dict, dict]:
    """Gbit/s on every line the routes cross (:func:`line_gbit`), and its share of the line (inf on a missing line)."""
    link_gbit = line_gbit(problem, plan)
    link_util = {}
    for key, used in link_gbit.items():
        link = problem.links.get(key)
        link_util[key] = used / link.gbit_per_s if link and link.gbit_per_s > 0 else math.inf
    return link_gbit, link_util


def line_residuals_s(problem: Problem, plan: Plan, classes: dict[str, Class]) -> dict[tuple[str, str], float]:
    """Each used line's mean residual transfer E[S²]/(2E[S]), seconds at its full rate, over the KV
    transfers the plan's routes send across it (what :meth:`placer.flows.Route.first_token_law` spreads by)."""
    first: dict[tuple[str, str], float] = defaultdict(float)
    second: dict[tuple[str, str], float] = defaultdict(float)
    for r in plan.routes:
        link = problem.links.get((r.src, r.dst))
        if r.src == r.dst or r.rps <= 0 or link is None or link.bytes_per_s <= 0:
            continue
        route = Route(problem, classes[r.request_class], r.pipeline, r.src, r.dst, problem.options.drc)
        size_s = route.wan_bytes() / link.bytes_per_s
        first[(r.src, r.dst)] += r.rps * size_s
        second[(r.src, r.dst)] += r.rps * size_s * size_s
    return {key: second[key] / (2 * s1) for key, s1 in first.items() if s1 > 0}


def _flow_law(problem: Problem, a: Assignment, c: Class, im: InstanceModel, decode: dict[PoolKey, DecodeState],
              link_util: dict, waits: dict[tuple, list[InstanceWait]],
              residuals: dict[tuple[str, str], float], kv_sites: dict[tuple[str, str, str], tuple[float, float]],
              stream_util: dict[tuple, LineLoad] | None = None) -> FlowLaw:
    """The TTFT law of one P assignment (:meth:`placer.flows.Route.first_token_law`): prefill + KV to the
    decoder that streams t0 (which streams it on import), the wait of the instances its queue
    sends it to (:func:`p_instance_laws`), the line's slowdown (on a line regulated streams feed, each
    instance's own: :func:`placer.line_law.line_stream_utilizations`) and that decoder's wait for KV room
    (:func:`placer.kv_wait.kv_wait_law`, over the site's pools its class is routed to, by its requests on each:
    :func:`placer.decode_sites.class_kv_waits`)."""
    key = a.key
    dst = a.dst or a.datacenter
    site = streamer_site(a.pipeline or P_MD, a.datacenter, dst)
    streamers = [s for k, s in decode.items() if (k.role, k.datacenter) == site and s.busy]
    peer = slowest_rdma_peer(s.im for s in streamers)
    route = Route(problem, c, a.pipeline or P_MD, a.datacenter, dst, problem.options.drc, im, peer,
                  _decoder_load(streamers) if problem.runtime is not None else None)
    line_util, residual = _line_utilization(link_util, a.datacenter, dst), residuals.get((a.datacenter, dst))
    parts = []
    for i, part in enumerate(waits[(*key, a.queue or "")]):
        util = (stream_util or {}).get((*key, a.queue or "", i, dst, c.name), line_util)
        det, tail = first_token_by_length(route, part.law, util, part.line_shares.get(dst, 0.0), residual)
        parts.append((part.weight, tail))
    if len(parts) > 1:
        tail = SplitTail(tuple(parts))
    share, wait_s = kv_sites.get((*site, c.name), (0.0, 0.0))
    if share > 0:
        tail = tail.with_kv_wait(share, wait_s)
    if a.pipeline in RELAY_PIPELINES:
        ok = _meets_tpot(problem, decode, RLD, a.datacenter)
    else:
        ok = _meets_tpot(problem, decode, MD if a.pipeline == P_MD else D, dst)
    if a.pipeline == P_RLD_MD:
        ok = ok and _meets_tpot(problem, decode, MD, dst)
    last = (RLD, a.datacenter) if a.pipeline == P_RLD else (D if a.pipeline == P_D else MD, dst)
    return FlowLaw(c.name, a.pipeline or P_MD, key, dst, a.rps, det, tail, ok,
                   site_tpot_late(decode, last, c, problem.tpot_s))


def _decoder_load(states: list[DecodeState]) -> tuple[float, float] | None:
    """(mean batch, step s) of the decoders that stream a flow's first token, over their instances: the
    Tokens messages the executor's first token follows back and the step it waits for
    (:meth:`placer.flows.Route.executor_s`). The settled batch is at least 1 (the step a request sees); below
    that the mean held is Little's, tokens/s × the step (its relayed requests with it)."""
    count = sum(s.count for s in states)
    if not count:
        return None
    held = [s.batch if s.batch > 1 else min(1.0, s.tokens_per_s * s.step_s + s.held) for s in states]
    return (sum(b * s.count for b, s in zip(held, states)) / count, sum(s.step_s * s.count for s in states) / count)


def runtime_note(problem: Problem) -> str | None:
    """The plan's note on where its TTFT's executor costs come from (None without a runtime)."""
    rt = problem.runtime
    if rt is None:
        return None
    return ("TTFT includes the executor's measured per-request costs (path overhead, KV export/import, the line's "
            f"socket path and in-order release; placer.executor_costs) from {rt.source or 'the given runtime'}")


def _ttft_quantiles(flows: list[FlowLaw]) -> dict[str, float]:
    """TTFT P50, P90 and P99 over the flows' requests mixed by rate (the Metrics keys)."""
    return {f"ttft_p{round(100 * q)}_s": mixture_quantile(flows, q) for q in (0.50, 0.90, 0.99)}


def _metrics(problem: Problem, flows: list[FlowLaw], cost: float, decode: dict[PoolKey, DecodeState],
             link_gbit: dict, rld_tokens: float, total_tokens: float, prices) -> Metrics:
    served = sum(f.rps for f in flows)
    late = sum(f.rps * f.prob_lost(problem.ttft_p90_s) for f in flows)
    goodput = served - late
    # the TPOT a request sees: the step of its batch with it in (B + 1, Palm: _settle_batch), weighted as the
    # executor and the simulator weigh it — by the gaps between a request's tokens (Σ (last − first) ÷ Σ (output
    # − 1)), on every pool a request's tokens come from: RLD's relayed and filtered tokens too (pdd's bench: RLD
    # made 25 % of the gaps at 12.5 ms a step, MD the rest at 8.8; MD alone read 8.8 where the simulator's
    # requests saw 10.1)
    gaps = sum(s.gaps_per_s * s.count for s in decode.values())
    tpot = sum(s.gap_seconds_per_s * s.count for s in decode.values() if s.gaps_per_s > 0) / gaps if gaps > 0 else 0.0
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
    counts = {p.key: p.count for p in plan.pools if p.count > 0}
    models = {key: instance(problem, key.chip, key.tp) for key in counts}
    notes: list[str] = [note] if (note := runtime_note(problem)) else []
    link_gbit, link_util = _link_use(problem, plan)
    # P queues: utilisation and waiting-time law (a pool without queue split is one queue)
    waits = p_queue_laws(problem, plan, counts, models)
    p_util = {key: law.rho for key, law in waits.items()}

    decode = {key: DecodeState(cnt, models[key]) for key, cnt in counts.items() if key.role != P}
    for key, design in plan_designs(problem, plan, models).items():
        decode[key].agg = design
    relays = _load_decode(problem, plan, classes, decode, link_util, notes)
    total_tokens = 0.0
    for r in plan.routes:
        total_tokens += r.rps * classes[r.request_class].output_tokens
    for key, st in decode.items():  # RLD first: MD decodes what RLD did not make (_hand_over)
        if st.busy and key.role == RLD:
            _settle_batch(problem, key, st, notes)
    _hand_over(problem, plan, classes, decode, relays)
    for key, st in decode.items():
        if st.busy and key.role != RLD:
            _settle_batch(problem, key, st, notes)
    rld_tokens = _rld_tokens_per_s(problem, plan, classes, decode, relays)

    agg_laws = a_queue_laws(problem, plan, counts, decode)
    residuals = line_residuals_s(problem, plan, classes)
    flows = _agg_flows(problem, plan, classes, decode, agg_laws)
    served_waits = p_instance_laws(problem, plan, counts, models)
    kv_sites = class_kv_waits(decode)
    stream_util = line_stream_utilizations(problem, plan, classes, served_waits)
    for a in plan.assignments:
        if a.role != P or a.rps <= 0:
            continue
        if a.key not in models:  # solver noise on a pool that got no instances
            notes.append(_ignored(a))
            continue
        flows.append(_flow_law(problem, a, classes[a.request_class], models[a.key], decode, link_util,
                               served_waits, residuals, kv_sites, stream_util))

    cost = sum(models[k].price_usd_per_h * cnt for k, cnt in counts.items())
    prices = token_prices(problem, plan, models, agg_prefill_shares(counts, agg_laws))
    metrics = _metrics(problem, flows, cost, decode, link_gbit, rld_tokens, total_tokens, prices)
    for key, (_, law, _) in agg_laws.items():
        p_util[key] = law.rho
    for key, rho in p_util.items():
        if rho >= 1.0:
            notes.append(f"prefill pool {_label(PoolKey(*key[:4]))} queue {key[4] or 'all'} is overloaded "
                         f"(utilisation {rho:.2f})")
    return Analysis(metrics, p_util, decode, dict(link_gbit), flows, rld_tokens, total_tokens, notes)


def _agg_flows(problem: Problem, plan: Plan, classes: dict[str, Class], decode: dict[PoolKey, DecodeState],
               laws: dict) -> list[FlowLaw]:
    """The TTFT law of every A assignment: ⌈n/C⌉ steps at the settled batch, the budget's wait."""
    flows = []
    for a in plan.assignments:
        key = (*a.key, a.queue or "")
        if a.role != AGG or key not in laws:
            continue
        design, law, _ = laws[key]
        det, tail = agg_first_token_law(design, classes[a.request_class], law)
        ok = decode[a.key].step_s <= problem.tpot_s * 1.0001
        flows.append(FlowLaw(a.request_class, P_A, a.key, a.datacenter, a.rps, det, tail, ok))
    return flows


def link_uses(problem: Problem, analysis: Analysis) -> list[LinkUse]:
    """Every line of the scenario with its planned Gbit/s (0 when unused)."""
    out = []
    for (s, d), link in sorted(problem.links.items()):
        out.append(LinkUse(src=s, dst=d, gbit_per_s_used=round(analysis.link_gbit.get((s, d), 0.0), 6),
                           gbit_per_s_capacity=link.gbit_per_s))
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
