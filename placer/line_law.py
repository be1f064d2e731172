"""The WAN line's slowdown when what feeds it is regulated: each P instance's KV transfers leave at the
ends of its prefills, not as Poisson arrivals (issue 42).

in:  a problem, a plan, its classes and the waits its P queues' requests meet
     (:func:`placer.queue_laws.p_instance_laws`: per queue, its instances' laws and line shares)
out: :func:`departure_cv2` (the squared coefficient of variation of a P instance's departure gaps),
     :func:`forward_cv2` (a packing instance's: its forwards' ends, each a batch of transfers),
     :func:`line_stream_utilizations` (per P instance, line and class, a :class:`~placer.ttft_tail.LineLoad`:
     the utilisation of the processor-sharing line on Poisson arrivals that slows that instance's transfers as
     the plan's line does, its batch-mates' weight and the line's work dispersion — what
     :meth:`placer.flows.Route.first_token_law` takes as ``utilization``)

A P instance that prefills long prompts one at a time sends their KV at the end of each prefill: its
transfers come more evenly than Poisson arrivals, fewer of them overlap on the line, and each is slowed
less than the M/G/1-PS ρ/(1 − ρ) (:func:`placer.line_excess.line_excess_at`, checked on the
simulator's line: tests/placer/test_line_tail.py). One that packs short prompts into a forward sends a batch
at each forward's end, the forwards as regular (tests/placer/test_packed_line_stream.py).
"""

from __future__ import annotations

from collections import defaultdict

from placer.flows import Route, instance
from placer.pdd import P, P_MD, queue_layout
from placer.plan import Plan
from placer.problem import Class, Problem
from placer.queueing import WaitModel, split_cv2
from placer.line_excess import LineStream, departures_of, line_excess_at, work_dispersion
from placer.ttft_tail import LineLoad


def departure_cv2(wait: WaitModel) -> float:
    """c² of the gaps between one P instance's departures (its prefills' ends).

    After a departure the next one comes a service time S later if a request waits, else after an idle
    spell (exponential, Poisson arrivals) plus S; the instance is left empty with probability 1 − ρ
    (M/G/1), so a gap is S + B·X, B ~ Bernoulli(1 − ρ), X ~ Exp(λ): c² = ρ²c_s² + 1 − ρ², exact for the
    M/G/1 marginal gap; Whitt's QNA (*The Queueing Network Analyzer*, Bell System Tech. J. 62, 1983) takes
    ρ²c_s² + (1 − ρ²)c_a² for renewal arrivals of c_a². A queue that packs short prompts into one forward
    (``wait.ride`` > 0) sends them in batches: c² 1 here (each transfer apart), the line's stream is its
    forwards' (:func:`forward_cv2`, :func:`_stream`), its batches counted by
    :func:`placer.ttft_tail.line_batchmates`."""
    return 1.0 if wait.ride > 0.0 else _qna_cv2(wait)


def _qna_cv2(wait: WaitModel) -> float:
    """QNA's ρ²c_s² + (1 − ρ²)c_a² of a queue's departures from its law (1 where it is empty or saturated)."""
    if wait.mean_s <= 0.0:
        return 1.0
    rho = min(max(wait.rho, 0.0), 1.0)
    if rho >= 1.0:
        return 1.0
    cs2 = max(wait.second_moment_s2 / (wait.mean_s * wait.mean_s) - 1.0, 0.0)
    return rho * rho * cs2 + (1.0 - rho * rho) * max(wait.arrival_cv2, 0.0)


def line_stream_utilizations(problem: Problem, plan: Plan, classes: dict[str, Class],
                             waits: dict[tuple, list]) -> dict[tuple, LineLoad]:
    """(role, dc, chip, tp, queue, instance index, dst, class) → how the plan's line slows that P instance's
    transfers of that class to dst (:class:`~placer.ttft_tail.LineLoad`): the utilisation at which an M/G/1-PS
    line on Poisson arrivals slows them as much on average, their batch-mates' weight (:func:`_mate_weight`) and
    the line's work dispersion (:func:`~placer.line_excess.work_dispersion`: the excess's variance,
    :func:`~placer.ttft_tail.congestion_var_factor`).

    Every P instance that sends KV over a line is one stream onto it (:class:`~placer.line_excess.LineStream`):
    the req/s it sends there, their transfers' size moments at the line's full rate and the c² of its
    departures (:func:`departure_cv2`) thinned to that line (a random share p of a renewal stream:
    p·c² + 1 − p, :func:`placer.queueing.split_cv2`; p the stream's req/s over all the instance's; a packing
    instance's: its forwards' batches, :func:`_stream`). :func:`~placer.line_excess.line_excess_at` gives each
    stream's mean excess per second of size x; the Poisson line that gives it runs at x/(1 + x), so the
    excess's mean is this line's and its spread that of a line that busy: lighter than the loaded line's
    geometric count where fewer transfers overlap. ``waits``: :func:`placer.queue_laws.p_instance_laws`' (an
    instance two queues share is one stream, :func:`_instances_behind`). Only lines that some
    regulated stream feeds are listed: on the others the M/G/1-PS law at the line's utilisation stands."""
    streams: dict[tuple[str, str], dict[tuple, list]] = defaultdict(dict)
    behind = _instances_behind(plan, waits)
    for a in plan.assignments:
        dst = a.dst or a.datacenter
        link = problem.links.get((a.datacenter, dst))
        qkey = (*a.key, a.queue or "")
        if a.role != P or a.rps <= 0 or dst == a.datacenter or link is None or link.bytes_per_s <= 0 or qkey not in waits:
            continue
        c = classes[a.request_class]
        route = Route(problem, c, a.pipeline or P_MD, a.datacenter, dst, problem.options.drc)
        size_s = route.wan_bytes() / link.bytes_per_s
        im = instance(problem, a.key.chip, a.key.tp)
        own_s = im.prefill_s(c.input_tokens, c.hit_rate)
        short = c.new_tokens < im.prefill_chunk_tokens
        where = behind.get(qkey, [])
        for i, part in enumerate(waits[qkey]):
            ident = (*a.key, where[i]) if len(where) == len(waits[qkey]) else (*qkey, i)
            acc = streams[(a.datacenter, dst)].setdefault(ident, [0.0, 0.0, 0.0, None, [], 0.0, []])
            rate = a.rps * part.weight
            acc[0] += rate
            acc[1] += rate * size_s
            acc[2] += rate * size_s * size_s
            acc[3] = part.law
            acc[4].append(((*qkey, i, dst, a.request_class), (size_s, own_s)))
            acc[5] = part.line_shares.get(dst, 0.0)
            if short:
                acc[6].append((rate, size_s))
    out: dict[tuple, LineLoad] = {}
    for by_instance in streams.values():
        keys = [k for k, acc in by_instance.items() if acc[0] > 0.0]
        line = [_stream(acc[3], acc[0], acc[1] / acc[0], acc[2] / acc[0], acc[5])
                for acc in (by_instance[k] for k in keys)]
        if sum(s.rate_per_s * s.mean_s for s in line) >= 1.0 or not any(s.arrival_cv2 < 1.0 for s in line):
            continue
        at = line_excess_at(line, [[pair for _, pair in by_instance[k][4]] for k in keys])
        dispersion = work_dispersion(line)
        for k, xs in zip(keys, at):
            for (key, (size_s, _)), x in zip(by_instance[k][4], xs):
                out[key] = LineLoad(x / (1.0 + x), _mate_weight(size_s, by_instance[k][6]), dispersion)
    return out


def _instances_behind(plan: Plan, waits: dict[tuple, list]) -> dict[tuple, list[int]]:
    """(role, dc, chip, tp, queue) → the pool's instance behind each of the queue's waits
    (:func:`placer.queue_laws.p_instance_laws` lays the queues on the instances by :func:`placer.pdd.queue_layout`;
    without queue figures the pool is one queue): two queues that share an instance send its ONE departure
    stream onto a line — its transfers leave a prefill apart whichever queue they came by (taken as two
    streams, rnd-7-30's L20 instance met its other queue's transfers as another instance's: 0.037 s of a
    0.31-s transfer's 0.062 s law excess, 0.002 s simulated)."""
    counts = {p.key: p.count for p in plan.pools if p.count > 0}
    queues: dict = defaultdict(dict)
    for a in plan.assignments:
        if a.role == P and a.rps > 0 and a.key in counts and (*a.key, a.queue or "") in waits:
            queues[a.key][a.queue or ""] = a.queue_instances
    out = {}
    for key, named in queues.items():
        layout = ({q: [(0, 1.0)] for q in named} if any(n is None for n in named.values())
                  else queue_layout(named, counts[key]))
        out.update({(*key, q): [i for i, _ in parts] for q, parts in layout.items()})
    return out


def _mate_weight(size_s: float, mates: list[tuple[float, float]]) -> float:
    """E[min(b, b′)]/b for a transfer of b = ``size_s`` over its batch-mates' sizes b′: the short prompts its P
    instance sends over the same line ((req/s, transfer s) per class), in proportion to their rates — under
    processor sharing a mate that starts with it delays it by the smaller of the two. A forward holds a chunk's
    tokens, so a long prompt's riders are shorter than the mix: the weight is at or above theirs (the flagship's
    hit-90-95, 0.076 s: 0.36 here, 0.20 on the simulator's forwards)."""
    total = sum(rate for rate, _ in mates)
    if size_s <= 0.0 or total <= 0.0:
        return 1.0
    return sum(rate * min(size_s, b) for rate, b in mates) / (total * size_s)


def forward_cv2(wait: WaitModel) -> float:
    """c² of the gaps between the ends of a packing P instance's forwards (each a batch of prompts: a head
    and the riders that joined it, ``wait.ride`` the share of arrivals riding): while prompts wait the next
    forward ends one forward later, so the gaps are as regular as a busy queue's departures — QNA's
    ρ²c_s² + (1 − ρ²)c_a² (:func:`departure_cv2`) at the forward level. The forward's own c_s² is taken as
    the queue's jumps' (each arrival's prefill alone or its marginal, ``wait.service``): a forward adds its
    riders' marginals to its head's prefill, so its time spreads less than those jumps — the law's c² is at
    or above the forwards' (the line's excess at or above theirs)."""
    return _qna_cv2(wait)


def _stream(law: WaitModel, rps: float, mean_s: float, second_s2: float, share: float) -> LineStream:
    """One P instance's transfers onto a line as a :class:`~placer.line_excess.LineStream`: ``rps`` of them,
    their size's moments (s at the line's full rate), ``share`` the instance's requests that cross it.

    An instance that prefills one prompt at a time sends them at its departures (:func:`departure_cv2`),
    thinned to the line. One that packs short prompts (``law.ride`` = r > 0) sends them in batches at its
    forwards' ends: a forward holds G prompts, geometric from 1 (P(G > g) = r^g), of which K ~ Bin(G, s)
    cross the line; the forwards that send any (P(K ≥ 1) = s/(1 − r(1 − s))) are a random share of the
    forwards (:func:`forward_cv2`, thinned), each a transfer of K prompts' bytes: E[K | K ≥ 1] =
    (1 − r(1 − s))/(1 − r), E[K² | K ≥ 1] = (2s²r/(1 − r)² + s/(1 − r))/P(K ≥ 1). So the line sees the
    forwards' regularity and the batches' work: :func:`~placer.line_excess.line_excess_at` gives the
    excess a transfer finds, and its own batch-mates, which start with it, stay
    :func:`~placer.ttft_tail.line_batchmates`' (s·2r/(1 − r), the size-biased E[K − 1]). Taken as Poisson
    transfers (the law before), a lone packing instance feeding a line (rnd-7-37's dc-a→dc-b at 80 %) was
    slowed 19 % more on average than the simulator's line."""
    r = min(max(law.ride, 0.0), 0.95)
    if r <= 0.0 or share <= 0.0:
        return LineStream(rps, mean_s, second_s2, _thinned_cv2(law, rps), departures_of(law))
    s = min(share, 1.0)
    any_share = s / (1.0 - r * (1.0 - s))
    k1 = s / (1.0 - r) / any_share
    k2 = (2.0 * s * s * r / (1.0 - r) ** 2 + s / (1.0 - r)) / any_share
    var = max(second_s2 - mean_s * mean_s, 0.0)
    return LineStream(rps / k1, k1 * mean_s, k1 * var + k2 * mean_s * mean_s, split_cv2(forward_cv2(law), any_share),
                      departures_of(law))


def _thinned_cv2(law: WaitModel, rps: float) -> float:
    """c² of the ``rps`` of an instance's departures (its law ``law``) that one stream carries: a random
    share of them (:func:`placer.queueing.split_cv2`)."""
    total = law.rho / law.mean_s if law.mean_s > 0.0 else 0.0
    return split_cv2(departure_cv2(law), rps / total) if total > 0.0 else 1.0
