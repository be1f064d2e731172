"""A P pool's "mix" tiers beside its "light" queue take whole instances (issue 42, rnd-7-0).

A mix tier carries the scenario's classes in proportion, so a pool whose light queue serves short prompts at
tens of req/s could fill its last fraction of an instance with a mix tier carrying a crumb of the longest
class. The hardware runs an instance two queues share as one FCFS line (:func:`placer.pdd.queue_layout`, the
simulator's and the executor's rule): each rare 85K-token prefill (43 s on an H20 tp1) held up every short
prompt behind it, which neither queue's law sees — random scenario rnd-7-0 promised a TTFT P90 of 2.42 s and
simulated 8.1 s. Now the mix tiers of such a pool sum to whole instances and the layout lays the light queue
after them, so the two never share one."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from placer.ilp.formulation import build, pdd_architecture
from placer.optimize import as_problem
from placer.p_queues import queue_layout
from placer.pdd import LIGHT, MIX, P
from placer.specs import load_scenario

EXAMPLES = Path(__file__).parents[3] / "examples"


def test_the_layout_lays_a_light_queue_after_the_mix_tiers_so_whole_mix_tiers_share_no_instance():
    # the mix tiers sum to one whole instance, the light queue to 1.7: in name order ('u0.073/mix' <
    # 'u0.800/light' < 'u0.800/mix') the light queue sat between them and shared instance 0 with a mix tier
    layout = queue_layout({"u0.073/mix": 0.3, "u0.800/light": 1.7, "u0.800/mix": 0.7}, 3)
    mix = {i for q in ("u0.073/mix", "u0.800/mix") for i, _ in layout[q]}
    light = {i for i, _ in layout["u0.800/light"]}
    assert mix == {0} and light == {1, 2}
    # a pool without a light queue is laid as before (name order)
    assert queue_layout({"u0.800/mix": 0.5, "u0.073/mix": 0.5}, 1) == {"u0.073/mix": [(0, 1.0)],
                                                                       "u0.800/mix": [(0, 1.0)]}


@pytest.fixture(scope="module")
def eight_dc():
    problem = as_problem(load_scenario(EXAMPLES / "eight-dc.yaml"))
    return build(problem, pdd_architecture(problem))


def test_the_milp_gives_the_mix_tiers_of_a_pool_with_a_light_queue_one_whole_count(eight_dc):
    m = eight_dc.model
    tiers = defaultdict(dict)
    for q, var in eight_dc.tier.items():
        if q.role == P:
            tiers[q.key][q.mix] = tiers[q.key].get(q.mix, []) + [var]
    wholes = {frozenset(v for v, c in r.coeffs.items() if c == 1.0): r for r in m.rows if r.family == "whole"}
    beside_light = [k for k, kinds in tiers.items() if LIGHT in kinds and MIX in kinds]
    assert len(beside_light) >= 10
    for key in beside_light:
        mix = tiers[key][MIX]
        if len(mix) == 1:
            assert m.vars[mix[0]].integer
        else:  # their sum equals one integer column
            row = wholes[frozenset(mix)]
            (count,) = [v for v, c in row.coeffs.items() if c == -1.0]
            assert row.sense == "==" and m.vars[count].integer
    # a pool with mix tiers and no light queue keeps them continuous
    for key, kinds in tiers.items():
        if LIGHT not in kinds and MIX in kinds and len(kinds[MIX]) > 1:
            assert not any(m.vars[v].integer for v in kinds[MIX])
