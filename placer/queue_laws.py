"""The queue laws of a plan: every P and A queue's waiting time, from the plan's own mix.

in:  a :class:`~placer.problem.Problem` and a :class:`~placer.plan.Plan` with ``assignments``,
     its pools' instance counts and models (and, for A queues, the settled decode state of
     :mod:`placer.evaluate`)
out: :func:`p_queue_laws` (each P queue alone on its ``queue_instances``: the planning rule
     `validate` checks), :func:`p_instance_laws` (the queues laid on the instances, one
     first-come-first-served queue each: the prediction `evaluate` makes; on a trace problem an instance whose
     load the trace drifts over windows longer than its queue forgets, a :class:`~placer.load_drift.DriftWait`),
     :func:`a_queue_laws` and :func:`agg_prefill_shares` (A pools' prefill budget);
     :func:`first_token_by_length` (a flow's TTFT law length by length, where its class's prompts spread);
     :func:`tail_notes` (requests whose prefill alone outlasts the TTFT SLA, and why).

A class whose prompts spread (``Class.new_tokens_cv2``) enters a P queue as the lognormal law of
lengths the simulator and the load generator draw, on a few points (:func:`class_items`), so E[S²]
and the wait's whole law (:mod:`placer.mg1_wait`) hold the within-class tail. The laws are
:mod:`placer.p_queues`' (:func:`~placer.p_queues.packed_wait_law`,
:func:`~placer.p_queues.queue_layout`) and :mod:`placer.aggregated`'s; this module only reads the
plan's assignments into them. Keys are (role, dc, chip, tp, queue): a
:class:`~placer.plan.PoolKey` and the queue's name ("" for a pool without queue split).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placer.aggregated import AggDesign, agg_prefill_time_share, at_batch, served_wait_law
from placer.load_drift import WINDOW_RELAXATIONS, DriftWait, drift_points, relaxation_s
from placer.p_queues import instance_arrival_cv2, packed_wait_law, queue_layout
from placer.pdd import AGG, P
from placer.plan import Assignment, Plan, PoolKey
from placer.problem import Class, Problem
from placer.queueing import WaitModel, lognormal_bands, lognormal_points, spread_prompt
from placer.ttft_tail import LengthMixTail, SplitTail, TtftTail
from placer.workload.trace_load import classed_arrivals

if TYPE_CHECKING:
    from placer.decode_state import DecodeState
    from placer.flows import Route


def p_queue_laws(problem: Problem, plan: Plan, counts: dict, models: dict) -> dict[tuple, WaitModel]:
    """M/G/1 law of every P queue, keyed (role, dc, chip, tp, queue), from the plan's own mix.

    Queues come from the assignments' ``queue``/``queue_instances``; a pool whose
    assignments name no queue is one queue over all its instances. Short prompts share
    forwards when they queue behind each other (see :func:`placer.p_queues.packed_wait_law`).
    """
    classes = {c.name: c for c in problem.classes}
    load: dict[tuple, list[tuple[float, float, float, float]]] = defaultdict(list)
    share: dict[tuple, float] = {}
    for a in plan.assignments:
        if a.role != P or a.rps <= 0 or a.key not in models:
            continue
        key = (*a.key, a.queue or "")
        load[key].extend(class_items(a.rps, classes[a.request_class], models[a.key]))
        share[key] = a.queue_instances if a.queue_instances is not None else counts[a.key]
    return {key: packed_wait_law(items, share[key], models[key[:4]], _cv2(problem, items, share[key]))
            for key, items in load.items()}


def _cv2(problem: Problem, items: list[tuple], instances: float) -> float:
    """The inter-arrival cv² at one of ``instances`` instances that split ``items``' req/s evenly."""
    return instance_arrival_cv2(problem, sum(it[0] for it in items) / instances) if instances > 0 else 1.0


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
    instances (:func:`placer.p_queues.queue_layout`), each instance takes the classes its queues
    send it (random splits of Poisson streams stay Poisson), and its law is
    :func:`placer.p_queues.packed_wait_law` of that mix on one instance; instances a queue owns
    alone give its own law. Without queue figures a pool is one queue over its instances.
    A trace problem's instance whose load the trace drifts (its classes come in runs: :mod:`placer.load_drift`)
    waits by the mixture of its law at the windows' loads (:func:`_drifted`); the MILP prices the stationary law.
    This is the prediction (`analyze`); `validate` checks the plan by the planning rule,
    :func:`p_queue_laws`."""
    classes = {c.name: c for c in problem.classes}
    by_pool: dict[PoolKey, list[Assignment]] = defaultdict(list)
    for a in plan.assignments:
        if a.role == P and a.rps > 0 and a.key in models:
            by_pool[a.key].append(a)
    arrivals = classed_arrivals(problem, frozenset(a.request_class for a in plan.assignments if a.rps > 0))
    class_rps: dict[str, float] = defaultdict(float)  # what each class's P req/s the trace's drift is shared by
    for a in (a for rows in by_pool.values() for a in rows) if arrivals else ():
        class_rps[a.request_class] += a.rps
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
        load: dict[int, list] = defaultdict(list)  # instance → (req/s, prefill s, new tokens, prompt tokens)
        crossing: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        routed: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))  # instance → class → req/s
        for a in rows:
            c = classes[a.request_class]
            for i, w in layout[a.queue or ""]:
                load[i].extend(class_items(a.rps * w, c, im))
                routed[i][a.request_class] += a.rps * w / served
                if a.dst and a.dst != a.datacenter:
                    crossing[i][a.dst] += a.rps * w
        waits, laws = {}, {}  # instances a queue owns alone carry the same load: one law for them all
        for i, items in load.items():
            total = sum(it[0] for it in items)
            if tuple(items) not in laws:
                law = packed_wait_law(items, served, im, _cv2(problem, items, served))
                laws[tuple(items)] = _drifted(problem, law, items, served, im, routed[i], arrivals, class_rps)
            waits[i] = (laws[tuple(items)], {d: r / total for d, r in crossing[i].items()})
        for q, parts in layout.items():
            out[(*key, q)] = [InstanceWait(w, *waits[i]) for i, w in parts]
    return out


def _drifted(problem: Problem, law: WaitModel, items: list, served: float, im, routed: dict[str, float],
             arrivals: tuple, class_rps: dict[str, float]) -> WaitModel:
    """``law`` of one P instance, or, where the problem's trace drifts the instance's load over windows longer
    than its queue forgets (:func:`placer.load_drift.drift_points`: the plan's share of each class at the instance,
    ``routed`` req/s over the class's P req/s ``class_rps``, applied to the trace's requests classed as the router
    classes them, ``arrivals``), a :class:`~placer.load_drift.DriftWait`: the law with each drift point's, the
    instance's items at that point's load factor."""
    if not arrivals or not 0.0 < law.rho < 1.0 or law.mean_s <= 0.0:
        return law
    shares = {name: rps / class_rps[name] for name, rps in routed.items() if class_rps.get(name, 0.0) > 0.0}
    try:  # the same instance's load under the same trace, shares and arrivals: its answer kept (evaluate runs often)
        key = (id(arrivals), tuple(items), served, im, tuple(sorted(shares.items())), problem.arrival_cv2,
               problem.arrival_rps)
        hash(key)
    except TypeError:  # an instance model holding unhashable data (a measured table): computed each time
        key = None
    if key is not None and key in _DRIFTED:
        return _DRIFTED[key][1]
    prefill: dict[tuple[int, float], float] = {}
    stream = []
    for t, name, n_in, hit in arrivals:
        p = shares.get(name)
        if p:
            s = prefill.get((n_in, hit))
            if s is None:
                s = prefill[(n_in, hit)] = im.prefill_s(n_in, hit)
            stream.append((t, p, s))
    relax = relaxation_s(law.rho, law.rho / law.mean_s * law.second_moment_s2)
    points = drift_points(stream, relax)
    out = law
    if len(points) > 1:
        laws = []
        for weight, factor in points:
            scaled = [(it[0] * factor, *it[1:]) for it in items]
            laws.append((weight, packed_wait_law(scaled, served, im, _cv2(problem, scaled, served))))
        # quasi-static only where each point's queue forgets within a window too (its relaxation grows as
        # 1/(1 − ρ)²): a busier window's queue does not settle at that load, and this law does not say what it meets
        if all(relaxation_s(w.rho, w.rho / w.mean_s * w.second_moment_s2) <= WINDOW_RELAXATIONS * relax
               for _, w in laws if w.mean_s > 0):
            out = DriftWait(law, tuple(laws))
    if key is not None:
        if len(_DRIFTED) >= 512:
            _DRIFTED.clear()
        _DRIFTED[key] = (arrivals, out)  # the arrivals held: their id stays theirs while the entry lives
    return out


#: :func:`_drifted`'s answers, keyed by what they are a function of.
_DRIFTED: dict[tuple, tuple] = {}


def class_items(rps: float, c: Class, im) -> list[tuple[float, float, float, float]]:
    """(req/s, prefill seconds alone, new tokens, prompt tokens) of class ``c`` at ``rps`` on a P instance ``im``:
    one item, or, where its prompts spread (``c.new_tokens_cv2`` > 0), the points of the lognormal
    law of new tokens with the class's mean and variance (:func:`placer.queueing.lognormal_points`:
    the law :func:`placer.workload.synthetic.class_requests` draws), each priced by
    ``im.prefill_s`` at its own length behind the class's cached prefix (:func:`~placer.queueing.spread_prompt`) — so the queue's E[S²] and its wait's percentiles keep the
    within-class tail (two points with the same mean and variance, :func:`~placer.queueing.spread_points`,
    give the same mean wait but a P90 wait 30 % short at cv² 1 and ρ 0.6)."""
    out = []
    for prob, factor in lognormal_points(c.new_tokens_cv2):
        n_in, hit = spread_prompt(c.input_tokens, c.hit_rate, factor)
        out.append((rps * prob, im.prefill_s(n_in, hit), new_tokens(c) * factor, n_in))
    return out


def first_token_by_length(route: Route, wait: WaitModel, utilization: float, line_share: float,
                          line_residual_s: float | None) -> tuple[float, TtftTail | LengthMixTail]:
    """(deterministic TTFT, random tail) of a flow (:meth:`placer.flows.Route.first_token_law`, packed), its
    class's spread of prompt lengths kept: where ``route.cls.new_tokens_cv2`` > 0, its lognormal law of
    lengths is cut into the bands of :data:`LENGTH_BANDS` (probability); a band's requests take the
    prefill, KV move and tail of its mean length, shifted down to its shortest's deterministic TTFT, the
    rest of the band's spread an independent excess (its mean and variance, the TTFT taken linear in the
    length across the band) — :class:`~placer.ttft_tail.LengthMixTail`, each at its length's own P-queue wait
    (:func:`_own_wait`: a packed queue's short prompts ride queued forwards, its long ones seldom). The
    deterministic part stays the class's mean length's."""
    if isinstance(wait, DriftWait):  # the trace drifts the instance's load: the mixture over its loads
        det = first_token_by_length(route, wait.base, utilization, line_share, line_residual_s)[0]
        return det, SplitTail(tuple((w, first_token_by_length(route, law, utilization, line_share, line_residual_s)[1])
                                    for w, law in wait.points))
    det, tail = route.first_token_law(_own_wait(wait, new_tokens(route.cls)), utilization, line_share,
                                      line_residual_s, packed=True)
    cv2 = route.cls.new_tokens_cv2
    if cv2 <= 0:
        return det, tail

    def law(factor: float):
        n_in, hit = spread_prompt(route.cls.input_tokens, route.cls.hit_rate, factor)
        cls = dataclasses.replace(route.cls, input_tokens=n_in, hit_rate=hit)
        return dataclasses.replace(route, cls=cls).first_token_law(_own_wait(wait, new_tokens(cls)), utilization,
                                                                    line_share, line_residual_s, packed=True)

    parts = []
    for prob, low, mean, var in lognormal_bands(cv2, LENGTH_BANDS):
        d_low, _ = law(low)
        d_mean, t_mean = law(mean)
        slope = (d_mean - d_low) / (mean - low) if mean > low else 0.0
        parts.append((prob, d_low - det, dataclasses.replace(t_mean, spread_mean_s=d_mean - d_low,
                                                             spread_var_s2=slope * slope * var)))
    return det, LengthMixTail(tuple(parts))


def _own_wait(wait: WaitModel, tokens: float) -> WaitModel:
    """The wait a prompt of ``tokens`` new tokens meets at its queue: a packed queue's own law for that
    length (:meth:`placer.packed_queue.PackedWait.for_tokens`: a short prompt rides queued forwards, a
    long one seldom), else the queue's."""
    for_tokens = getattr(wait, "for_tokens", None)
    return for_tokens(tokens) if for_tokens is not None else wait


#: Edges (cumulative probability) of the bands :func:`first_token_by_length` cuts a class's lengths into:
#: finer toward the tail, where the 90th and 99th percentiles read.
LENGTH_BANDS = (0.0, 0.2, 0.4, 0.6, 0.75, 0.85, 0.92, 0.96, 0.985, 1.0)


def tail_notes(problem: Problem, plan: Plan, share_floor: float = 0.001) -> list[str]:
    """Plan notes for requests no plan can serve within the TTFT SLA on the P pools they are routed
    to: those whose prefill alone takes longer than the SLA (they are late before they queue).

    A class's uncached prompt tokens are taken lognormal with its mean and ``new_tokens_cv2``
    (a single length where that is 0); on each P pool it is routed to, the prompt length whose
    prefill alone (``InstanceModel.prefill_s``) equals the SLA is found by bisection, and the
    share of the class's requests above it named, with that length — where it is at least
    ``share_floor`` of all the plan's traffic. Long-prompt isolation (a pool or a priority of
    their own) is not planned; the note says which requests miss and why."""
    from placer.flows import instance

    classes = {c.name: c for c in problem.classes}
    total = sum(a.rps for a in plan.assignments if a.role == P and a.rps > 0)
    late: dict[str, list] = {}  # class → [req/s over, req/s, smallest length factor, pools]
    for a in plan.assignments:
        if a.role != P or a.rps <= 0 or total <= 0:
            continue
        c = classes[a.request_class]
        im = instance(problem, a.key.chip, a.key.tp)
        factor = _sla_length_factor(im, c, problem.ttft_p90_s)
        row = late.setdefault(c.name, [0.0, 0.0, math.inf, []])
        row[0] += _lognormal_exceeds(factor, c.new_tokens_cv2) * a.rps
        row[1] += a.rps
        row[2] = min(row[2], factor)
        row[3].append(f"{a.key.datacenter} {a.key.chip} tp{a.key.tp}")
    notes = []
    for name, (over, rps, factor, pools) in sorted(late.items(), key=lambda kv: -kv[1][0]):
        if over < share_floor * total:
            continue
        c = classes[name]
        notes.append(f"tail: {over / rps:.1%} of class {name!r} ({over:.3g} req/s, {over / total:.1%} of the "
                     f"traffic) cannot meet the TTFT SLA of {problem.ttft_p90_s:g} s: prompts over "
                     f"{factor * new_tokens(c):,.0f} new tokens (the class's mean: {new_tokens(c):,.0f}) take longer "
                     f"than that to prefill alone on its P pools ({', '.join(sorted(set(pools)))}); faster prefill "
                     "chips or a looser SLA would serve them")
    return notes


def _sla_length_factor(im, c: Class, sla_s: float) -> float:
    """The factor f on class ``c``'s prompt whose prefill alone on ``im`` takes ``sla_s`` (inf if none).

    A pure function of (the instance, the class's input tokens and hit rate, the SLA): each answer is
    kept (:func:`_sla_length_factor_of`), as a bisection costs ~50 prefill evaluations at lengths no
    other caller asks for — 0.1-0.3 s of pdd-two-dc's solve when it ran per P assignment."""
    try:
        hash(im)
    except TypeError:  # an instance model holding unhashable data (a measured table): computed each time
        return _length_factor(im, c.input_tokens, c.hit_rate, sla_s)
    return _sla_length_factor_of(im, c.input_tokens, c.hit_rate, sla_s)


def _length_factor(im, input_tokens: float, hit_rate: float, sla_s: float) -> float:
    """:func:`_sla_length_factor` by bisection on the factor on the prompt's new tokens, its cached prefix
    kept (:func:`~placer.queueing.spread_prompt`; 40 halvings)."""

    def alone_s(factor: float) -> float:
        return im.prefill_s(*spread_prompt(input_tokens, hit_rate, factor))

    if alone_s(1.0) >= sla_s:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = 1.0, 2.0
        while alone_s(hi) < sla_s:
            lo, hi = hi, hi * 2
            if hi > 1e4:
                return math.inf
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if alone_s(mid) < sla_s else (lo, mid)
    return hi


#: :func:`_length_factor` kept per (instance model, input tokens, hit rate, SLA): equal instance models
#: (frozen dataclasses, equal field by field) prefill alike, so the key is the answer's whole input.
_sla_length_factor_of = functools.lru_cache(maxsize=4096)(_length_factor)


def _lognormal_exceeds(factor: float, cv2: float) -> float:
    """P(X > factor) for X lognormal with mean 1 and variance ``cv2`` (a point at 1 where cv2 is 0)."""
    if math.isinf(factor):
        return 0.0
    if cv2 <= 0:
        return 1.0 if factor < 1.0 else 0.0
    if factor <= 0:
        return 1.0
    sigma = math.sqrt(math.log1p(cv2))
    z = (math.log(factor) + sigma * sigma / 2) / sigma
    return 0.5 * math.erfc(z / math.sqrt(2))


def new_tokens(c: Class) -> float:
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
        if a.role != AGG or a.rps <= 0 or a.key not in decode:
            continue
        key = (*a.key, a.queue or "")
        items[key].append((a.rps, classes[a.request_class]))
        share[key] = a.queue_instances if a.queue_instances is not None else counts[a.key]
    out = {}
    for key, its in items.items():
        st = decode[key[:4]]
        design = at_batch(st.agg, st.batch) if st.tokens_per_s > 0 else st.agg
        out[key] = (design, served_wait_law(design, its, share[key]), share[key])
    return out


def agg_prefill_shares(counts: dict, laws: dict) -> dict[PoolKey, float]:
    """Each A pool's share of its time spent on prefill chunks: its queues' busy budget (ρ × the
    queue's instances, summed) over its instances, priced at its design's marginal chunk time."""
    busy: dict[PoolKey, float] = defaultdict(float)
    design: dict[PoolKey, AggDesign] = {}
    for key, (d, law, instances) in laws.items():
        busy[key[:4]] += law.rho * instances
        design[key[:4]] = d
    return {key: agg_prefill_time_share(design[key], busy[key] / counts[key]) for key in busy}
