"""A packing P instance's KV transfers on the simulator's line (issue 42, rnd-7-37's dc-a→dc-b): they leave
in batches at its forwards' ends, the forwards as regular as a busy queue's departures — so the line slows
them less than Poisson transfers plus their batch-mates (the law before), as :func:`placer.line_law._stream`
now says."""

from __future__ import annotations

import random

import pytest

from placer.line_law import _stream
from placer.queueing import WaitModel
from placer.line_excess import line_excess_factors
from placer.ttft_tail import line_batchmates

from tests.placer.test_line_tail import _fed_line  # the simulator's line

CAP = 8  # prompts a forward holds
SIZE_S, SHARE = 0.1, 0.6  # each transfer at the line's full rate; the share of the instance's requests crossing it


def _packing_instance(rate: float, horizon_s: float, rng: random.Random, head_s: float, rider_s: float):
    """Poisson arrivals at one P instance that packs its queue (FCFS, at most CAP a forward of ``head_s`` plus
    ``rider_s`` a rider): each forward's
    members leave together at its end. Returns (departure times, one per member; measured ride share, busy
    share)."""
    t, free, queue, out, rides, n, busy = 0.0, 0.0, [], [], 0, 0, 0.0
    arrivals = []
    while t < horizon_s:
        t += rng.expovariate(rate)
        arrivals.append(t)
    i = 0
    while i < len(arrivals) or queue:
        if not queue or (i < len(arrivals) and arrivals[i] <= free):
            a = arrivals[i]
            i += 1
            n += 1
            if a < free and queue and len(queue) < CAP:  # the forward in formation has room: it rides
                rides += 1
            queue.append(a)
            continue
        start = max(free, queue[0])
        k = min(len(queue), CAP)
        free = start + head_s + (k - 1) * rider_s
        busy += free - start
        out.extend([free] * k)
        queue = queue[k:]
    return out, rides / n, busy / free


def _excess(util: float, head_s: float, rider_s: float, seed: int = 5) -> tuple[float, float, float]:
    """(simulated, law, law before) mean excess per second of size of the instance's transfers on a line
    they load to ``util``: the law fed the instance's measured ride and busy shares."""
    rng = random.Random(seed)
    times, ride, rho = _packing_instance(util / (SHARE * SIZE_S), 6000.0, rng, head_s, rider_s)
    arrivals = sorted((t, SIZE_S, 0) for t in times if rng.random() < SHARE)
    eng = _fed_line(arrivals, rng)
    excess = [(eng.landed[rid] - t - s) / s for rid, (t, s, _) in enumerate(arrivals) if t > 300.0]
    jumps = ((1 - ride, head_s), (ride, rider_s))
    mean = sum(p * s for p, s in jumps)
    law = WaitModel(rho, mean, sum(p * s * s for p, s in jumps), ride=ride, service=jumps)
    line_rate = len(arrivals) / arrivals[-1][0]
    line_rho = line_rate * SIZE_S
    mates = line_batchmates(law, SHARE)
    (found,) = line_excess_factors([_stream(law, line_rate, SIZE_S, SIZE_S ** 2, SHARE)])
    return sum(excess) / len(excess), found + mates, line_rho / (1 - line_rho) + mates


def test_a_packing_instance_alone_on_a_line_is_slowed_as_its_forwards_batches_say():
    """Lines 60-90 % busy, forwards of a short and a long prefill (ride 0.14-0.62): the law fed by the
    instance's forwards and batches is within 25 % of the simulated excess at every point (−18 % to +23 %) and
    13 % on average; the law before (Poisson transfers plus batch-mates) was 7-52 % above, 25 % on average."""
    grid = [_excess(util, head, head / 4) for util in (0.6, 0.8, 0.9) for head in (0.06, 0.12)]
    new = [law / sim - 1 for sim, law, _ in grid]
    old = [before / sim - 1 for sim, _, before in grid]
    assert max(abs(e) for e in new) < 0.25
    assert sum(abs(e) for e in new) / len(new) < 0.15
    assert sum(abs(e) for e in old) / len(old) > 0.2 and min(old) > 0.0


def test_a_split_tail_without_its_line_keeps_its_kv_wait_and_its_pack():
    """SplitTail.without_line (the breakdown's P90 "without the line") takes only the line's excess off each
    instance's tail: it kept the bare queue wait, dropping the decoders' KV wait and the forward-mates too."""
    from placer.ttft_tail import SplitTail, TtftTail

    wait = WaitModel(0.5, 0.1, 0.02)
    tail = TtftTail(wait, wan_excess_mean_s=0.3, pack_mean_s=0.05, pack_var_s2=0.002, kv_wait_share=0.2,
                    kv_wait_mean_s=1.0)
    split = SplitTail(((0.5, tail), (0.5, tail)))
    for t in (0.2, 0.5, 1.0):
        assert split.without_line().prob_exceeds(t) == tail.without_line().prob_exceeds(t)
        assert split.without_line().prob_exceeds(t) > TtftTail(wait).prob_exceeds(t)


def test_a_batch_mate_delays_a_transfer_by_the_smaller_of_the_two():
    """Forwards of two prompts, each's KV 0.08 s or 0.01 s at the line's full rate (even odds), leaving together
    on a line 10 % busy: under processor sharing a mate delays a transfer by the smaller of the two, so the large
    one's excess per second of size is the line's count plus E[min(b, b′)]/b = 0.56
    (:func:`placer.line_law._mate_weight`): the law is within 10 % of the simulated line's (−8 %: a batch finds a
    little more than a Poisson arrival), where counting the mate at the large one's own size put it 52 % above."""
    from placer.line_law import _mate_weight

    rng = random.Random(4)
    sizes, rho = (0.08, 0.01), 0.1
    t, arrivals = 0.0, []
    while t < 20_000.0:
        t += rng.expovariate(rho / sum(sizes))
        arrivals += [(t, rng.choice(sizes), 0) for _ in range(2)]
    eng = _fed_line(arrivals, rng)
    simulated = {}
    for b in sizes:
        excess = [eng.landed[i] - t0 - s for i, (t0, s, _) in enumerate(arrivals) if s == b]
        simulated[b] = sum(excess) / len(excess) / b
        law = rho / (1 - rho) + _mate_weight(b, [(1.0, s) for s in sizes])
        assert law == pytest.approx(simulated[b], rel=0.10), b
    assert rho / (1 - rho) + 1.0 > 1.4 * simulated[0.08]
