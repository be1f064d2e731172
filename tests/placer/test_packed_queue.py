"""The packed queue's law (:mod:`placer.packed_queue`) against the simulator's own P instance, where long
prompts ride behind tiny ones on a memory-bound head (issue 42, rnd-7-30).

On rnd-7-30's B200 tp4-dep instance of qwen3-235b-a22b, a 5.7K-token prompt that rides a forward headed
by a tiny cached prompt saves the whole weight read the tiny one's forward pays; priced beside the typical
head (long ones included: compute-bound, so only the fixed overhead saved) the law's P side was 12–19 %
above the simulator's for every class, and the plan's TTFT P90 promise 12 % above the simulated one.
"""

from __future__ import annotations

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
