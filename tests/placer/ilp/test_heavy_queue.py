"""PDD's heavy/light P split (issue 45): where a pool has light and heavy classes and its heavy
queue can serve them on time, a queue takes the heavy ones only and another the light ones only,
each in proportion among themselves ("set" queues, exact moments), at the cap and on whole
instances — so a P pool may prefill only the long, cold prompts while another takes the rest
(PrfaaS's split), and no short prompt waits behind them on a shared instance."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from placer.ilp.data import candidate_pools, heavy_classes
from placer.ilp.formulation import pdd_architecture
from placer.ilp.p_tiers import SPLIT_MAX_POOLS
from placer.ilp.sets import Pool
from placer.optimize import SolveConfig, as_problem, optimize
from placer.p_queues import light_classes, queue_layout
from placer.pdd import LIGHT, MIX, P
from placer.sim.config import SimConfig
from placer.sim.engine import simulate
from placer.specs import load_scenario
from placer.validate import validate

EXAMPLES = Path(__file__).parents[3] / "examples"
#: prfaas's plan on the flagship with its threshold enforced, before the split (``placer compare
#: examples/pdd-two-dc.yaml``: 256.6, simulated 260.6), when PDD's queues could not pose it (PDD 186.3)
PRFAAS_BCR, PRFAAS_SIM_BCR = 256.6, 260.6


@pytest.fixture(scope="module")
def flagship():
    return as_problem(load_scenario(EXAMPLES / "pdd-two-dc.yaml"))


@pytest.fixture(scope="module")
def plan(flagship):
    return optimize(flagship, SolveConfig(time_limit_s=60.0, marginals=False))


def _p_queues(problem) -> tuple[dict, dict, list[str]]:
    pools, instances, _, _, notes = candidate_pools(problem, pdd_architecture(problem))
    queues = defaultdict(list)
    for q in pools:
        if q.role == P:
            queues[q.key].append(q)
    return queues, instances, notes


def test_a_split_pool_has_a_heavy_and_a_light_set_queue_at_the_cap_on_whole_instances(flagship):
    queues, instances, _ = _p_queues(flagship)
    everyone = frozenset(range(len(flagship.classes)))
    split = 0
    for key, qs in queues.items():
        sets = [q for q in qs if q.admits]
        light = frozenset(light_classes(flagship, instances[qs[0]]))
        heavy = heavy_classes(flagship, instances[qs[0]])
        at_cap = {q.admits for q in sets if q.util == flagship.options.utilization_cap}
        if heavy and not any(q.mix == LIGHT for q in qs):  # the light split taken: its sets replace the light queue
            split += 1
            assert heavy == everyone - light and light
            assert heavy in at_cap and light in at_cap, key
        for q in sets:  # every set queue (the light split's and the threshold cuts'): whole, laid out first
            assert q.whole
            assert q.mix == "set:" + "+".join(flagship.classes[k].name for k in sorted(q.admits))
            assert q.queue < min(o.queue for o in qs if not o.whole)
        assert all(q.admits for q in qs if q.whole), key
    assert split >= 2  # dc-a's 910B: the cold classes heavy, the high-hit ones light


def test_whole_queues_keep_whole_instances_whatever_else_the_plan_lists():
    # a plan lists only the queues with traffic: here one whole heavy instance and 0.4 of a mix tier,
    # on two instances; the heavy queue must not share an instance with the mix's short prompts
    heavy = Pool(P, "dc-a", "H100-SXM", 1, 0.8, "set:cold+odd", admits=frozenset({2, 3}), whole=True)
    mix = Pool(P, "dc-a", "H100-SXM", 1, 0.36, MIX)
    layout = queue_layout({heavy.queue: 1.0, mix.queue: 0.4}, 2)
    assert layout[heavy.queue] == [(0, 1.0)]
    assert layout[mix.queue] == [(1, 1.0)]


def test_the_split_is_left_out_where_too_many_pools_would_take_it():
    problem = as_problem(load_scenario(EXAMPLES / "eight-dc.yaml"))
    queues, instances, notes = _p_queues(problem)
    assert not any(q.whole for qs in queues.values() for q in qs)
    assert any(f"(> {SPLIT_MAX_POOLS}" in note for note in notes)
    for key, qs in queues.items():  # every pool with light and heavy classes keeps its light queue
        if heavy_classes(problem, instances[qs[0]]):
            assert any(q.mix == LIGHT for q in qs), key


def test_pdd_reaches_prfaas_split_on_the_flagship(flagship, plan):
    gap = max(plan.solver.mip_gap or 0.0, 0.01)
    assert plan.metrics.bcr_requests_per_usd >= (1 - gap) * PRFAAS_BCR
    assert validate(flagship, plan) == []


def test_each_set_queue_holds_its_classes_in_proportion_its_tiers_on_whole_instances(flagship, plan):
    by_queue = defaultdict(dict)
    instances = {}
    for a in plan.assignments:
        if a.role == P and a.queue and a.queue.startswith("set:"):
            key = (a.datacenter, a.chip, a.tp, a.queue)
            by_queue[key][a.request_class] = by_queue[key].get(a.request_class, 0.0) + a.rps
            instances[key] = a.queue_instances
    heavy = [key for key in by_queue if "hit-0-90" in key[3]]
    assert heavy, "the flagship's plan prefills the cold classes in a heavy queue"
    shares = {c.name: c.share for c in flagship.classes}
    for key, rps in by_queue.items():
        admitted = key[3].removeprefix("set:").split("/")[0].split("+")
        total = sum(rps.values())
        whole = sum(shares[name] for name in admitted)
        for name in admitted:
            assert rps.get(name, 0.0) == pytest.approx(total * shares[name] / whole, rel=1e-4), (key, name)
    whole_sets = defaultdict(float)  # a set's tiers together on whole instances
    for key, count in instances.items():
        whole_sets[key[:3], key[3].split("/")[0]] += count
    for key, count in whole_sets.items():
        assert count == pytest.approx(round(count), abs=1e-6) and round(count) >= 1, key


def test_the_flagship_plan_keeps_its_sla_and_prfaas_bcr_in_simulation(flagship, plan):
    # PDD simulated 188.5 before the split
    sim = simulate(flagship, plan, SimConfig(requests=4000, seed=3)).data
    assert sim["ttft_p90_s"] <= flagship.ttft_p90_s
    assert sim["bcr_requests_per_usd"] >= 0.98 * PRFAAS_SIM_BCR
