"""The packed queue's law (:mod:`placer.packed_queue`) against the simulator's own P instance, where long
prompts ride behind tiny ones on a memory-bound head (issue 42, rnd-7-30).

On rnd-7-30's B200 tp4-dep instance of qwen3-235b-a22b, a 5.7K-token prompt that rides a forward headed
by a tiny cached prompt saves the whole weight read the tiny one's forward pays; priced beside the typical
head (long ones included: compute-bound, so only the fixed overhead saved) the law's P side was 12–19 %
above the simulator's for every class, and the plan's TTFT P90 promise 12 % above the simulated one.
"""

from __future__ import annotations

import random
from heapq import heappop
from types import SimpleNamespace

import pytest

from placer.flows import instance
from placer.packed_queue import packed_queue
from placer.problem import resolve
from placer.sim.prefill import PrefillInstance
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict
from tests.placer.test_wait_tail import _Engine, _Series, law_items, simulated_p_side_s

#: rnd-7-30's P mix in two classes: tiny cached prompts (6 new tokens) and 5.7K-token uncached ones.
MIX = [(0.67, 572, 0.9888), (0.33, 6612, 0.136)]


@pytest.fixture(scope="module")
def im():
    data = small_pdd_dict()
    data.update(model="qwen3-235b-a22b", weight_dtype="fp8", kv_dtype="fp8", options={"tp_degrees": [4]})
    for dc in data["datacenters"]:
        dc["inventory"] = {"B200": 16}
    return instance(resolve(parse_scenario(data)), "B200", 4)


@pytest.mark.parametrize("rho", [0.6, 0.8])
def test_each_class_waits_at_a_packed_queue_what_the_simulator_measures(im, rho):
    """Each class's mean P side past its own prefill (arrival to the end of its forward, less its prefill
    alone) is the simulated one within 6 %: a long rider's saving is the weight read of the tiny head it
    rides behind."""
    rps = rho / sum(s * im.prefill_s(n, h) for s, n, h in MIX)
    state = packed_queue(law_items(im, MIX, rps), 1.0, im)
    alone = PrefillInstance(_Engine(), im, None, _Series())
    for k, (xs, (_, n_in, hit)) in enumerate(zip(simulated_p_side_s(im, MIX, rps), MIX)):
        new = max(1, round((1 - hit) * n_in))
        simulated = sum(xs) / len(xs) - alone.alone_s(n_in, new)
        assert state.side_s[k] == pytest.approx(simulated, rel=0.06), f"class {k} at {rho}"


#: Heads of both kinds: tiny cached prompts (memory-bound: the weight read) and 3K-token uncached ones
#: (compute-bound), with 1.5K-token riders that fit behind either.
BOTH_HEADS = [(0.4, 16384, 0.9995), (0.3, 3000, 0.0), (0.3, 1500, 0.0)]


def test_a_rider_saves_what_the_heads_it_rides_behind_leave_it(im):
    """The work a packed instance saves per arrival (its prompts' prefills alone less its forwards' time) is the
    simulator's within 8 %: a 1.5K-token rider behind a tiny memory-bound head costs almost nothing, behind a
    3K-token compute-bound one its FLOPs — averaged over those heads, not priced beside their mean (which is
    compute-bound: the law saved 18 % too little, and put the instance at 0.632 busy where it is 0.620)."""
    rps = 0.7 / sum(s * im.prefill_s(n, h) for s, n, h in BOTH_HEADS)
    items = law_items(im, BOTH_HEADS, rps)
    state = packed_queue(items, 1.0, im)
    law_saving_s = (sum(it[0] * it[1] for it in items) - state.rho) / rps
    alone = PrefillInstance(_Engine(), im, None, _Series())
    done = simulated_forwards_s(im, BOTH_HEADS, rps)
    prefills_s = sum(alone.alone_s(n_in, new) for n_in, new in done["requests"])
    simulated_saving_s = (prefills_s - done["busy_s"]) / len(done["requests"])
    assert law_saving_s == pytest.approx(simulated_saving_s, rel=0.08)


def simulated_forwards_s(im, mix, rps: float, requests: int = 60_000, seed: int = 2) -> dict:
    """One simulated P instance under Poisson arrivals of ``mix``: each request's (prompt, new tokens) and the
    seconds its forwards took in all."""
    engine = _Engine()
    p = PrefillInstance(engine, im, None, _Series())
    rng = random.Random(seed)
    t, done = 0.0, []
    arrivals = []
    for i in range(requests):
        t += rng.expovariate(rps)
        _, n_in, hit = mix[rng.choices(range(len(mix)), [s for s, _, _ in mix])[0]]
        arrivals.append((t, n_in, max(1, round((1 - hit) * n_in))))
    i = 0
    while i < len(arrivals) or engine.heap:
        if i < len(arrivals) and (not engine.heap or arrivals[i][0] <= engine.heap[0][0]):
            ta, n_in, new = arrivals[i]
            p.enqueue(SimpleNamespace(rid=i, t_arr=ta, n_in=n_in, new=new, left=new, pos=n_in - new), ta)
            done.append((n_in, new))
            i += 1
        else:
            te, _, fn, arg = heappop(engine.heap)
            fn(te, arg)
    return {"requests": done, "busy_s": p.busy_s}
