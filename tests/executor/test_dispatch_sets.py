"""The plan's P queues in the executor: a request prefills on an instance of a queue its class is routed
to ("set" queues on whole instances, a "light" queue and the mix tiers beside it — as the planner laid
them out and the simulator sends each class), and on any P when none is up (counted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.admission import AdmissionPolicy
from executor.cluster import LocalCluster
from executor.config import ServingConfig
from executor.dispatch import assign
from executor.health import HealthMonitor
from executor.placement import p_instance_classes, placement
from executor.prometheus import prometheus_text
from executor.registry import InstanceInfo, InstanceRegistry
from executor.routing import RoutingPolicy
from executor.set_queues import SetQueues
from placer.pdd import set_queue_classes
from placer.plan import Plan
from placer.specs import parse_scenario

HEAVY, LIGHT = "set:long/u0.800", "set:mid+short/u0.800"
LONG, SHORT = [256, *range(200)], [256, *b"the quick brown fox"]  # 201 and 20 tokens, no prefix hit


def _row(cls: str, queue: str, instances: float, rps: float, uncached: int | None, tp: int = 1) -> dict:
    row = {"request_class": cls, "pipeline": "P-MD", "role": "P", "datacenter": "dc-a", "chip": "X", "tp": tp,
           "dst": "dc-b", "rps": rps, "queue": queue, "queue_instances": instances}
    return row | ({"uncached_tokens": uncached} if uncached is not None else {})


def _plan(rows: list[dict], p_count: int = 3, pools: tuple[dict, ...] = ()) -> Plan:
    """P on dc-a (X, tp1, `p_count` instances), MD on dc-b; the heavy set on instance 0, the light one on 1-2."""
    return Plan.model_validate({
        "scenario": "sets",
        "pools": [{"role": "P", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": p_count}, *pools,
                  {"role": "MD", "datacenter": "dc-b", "chip": "Y", "tp": 1, "count": 1}],
        "routes": [{"request_class": c, "pipeline": "P-MD", "src": "dc-a", "dst": "dc-b", "rps": 1.0}
                   for c in ("long", "mid", "short")],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 10.0}],
        "assignments": rows})


SPLIT = _plan([_row("long", HEAVY, 1.0, 1.0, 200), _row("mid", LIGHT, 2.0, 1.0, 60),
               _row("short", LIGHT, 2.0, 1.0, 19)])
P0, P1, P2 = (f"p-dc-a-X-tp1-{k}" for k in range(3))


def _registry(plan: Plan) -> InstanceRegistry:
    reg = InstanceRegistry(block_size=4, health=HealthMonitor(suspect_after=1, down_after=2))
    for s in placement(plan):
        reg.add(InstanceInfo(s.name, s.role, s.datacenter, s.chip, s.tp), joining=False)
    return reg


def _send(reg: InstanceRegistry, routing: RoutingPolicy, prompt: list[int], n: int) -> list:
    """`n` attempts of `prompt` that stay (each adds its load, as the router does)."""
    out = []
    for _ in range(n):
        a = assign(reg, routing, AdmissionPolicy(), prompt, 8, exclude=set(), prefer_relay=False)
        reg.load[a.p.name] += 1
        out.append(a)
    return out


def test_the_plan_lays_each_set_on_its_own_whole_instances():
    assert p_instance_classes(SPLIT) == {P0: {"long"}, P1: {"mid", "short"}, P2: {"mid", "short"}}


def test_long_prompts_reach_only_the_heavy_set_and_short_ones_only_the_light_set():
    """Without the sets, least load spreads both kinds over all three instances (the long prompts' work
    lands on the light instances, short prompts wait behind it)."""
    reg, routing = _registry(SPLIT), RoutingPolicy.from_plan(SPLIT)
    mixed = [(LONG, 6), (SHORT, 6), (LONG, 3), (SHORT, 9)]
    used = {id(p): {a.p.name for a in _send(reg, routing, p, n)} for p, n in mixed[:2]}
    for p, n in mixed[2:]:
        used[id(p)] |= {a.p.name for a in _send(reg, routing, p, n)}
    assert used[id(LONG)] == {P0}
    assert used[id(SHORT)] == {P1, P2}  # within the set: least load and prefix hit, as before


def test_a_set_with_no_instance_up_falls_back_to_any_p_and_says_so():
    reg, routing = _registry(SPLIT), RoutingPolicy.from_plan(SPLIT)
    reg.draining.add(P0)  # the heavy set's only instance leaves
    (a,) = _send(reg, routing, LONG, 1)
    assert a.p.name in {P1, P2} and a.set_fallback
    (b,) = _send(reg, routing, SHORT, 1)
    assert not b.set_fallback


def test_instances_a_mix_queue_shares_take_every_class():
    """A pool with a set on instance 0 and a mix tier over 1-2: instance 0 is long's alone, 1-2 take both."""
    plan = _plan([_row("long", HEAVY, 1.0, 1.0, 200), _row("long", "u0.560/mix", 1.5, 0.5, 200),
                  _row("short", "u0.560/mix", 1.5, 1.0, 19)])
    assert p_instance_classes(plan) == {P0: {"long"}}
    reg, routing = _registry(plan), RoutingPolicy.from_plan(plan)
    assert {a.p.name for a in _send(reg, routing, SHORT, 6)} == {P1, P2}
    assert P0 in {a.p.name for a in _send(reg, routing, LONG, 6)}


def test_a_light_queue_s_instances_take_only_the_classes_routed_to_it():
    """PDD's heavy/light split without sets: a whole-instance mix tier (instance 0) for the long and mid
    prompts, a light queue (instances 1-2) for mid and short. Before, only set queues restricted their
    instances, so long prompts landed on the light instances as least load sent them."""
    plan = _plan([_row("long", "u0.560/mix", 1.0, 1.0, 200), _row("mid", "u0.560/mix", 1.0, 0.2, 60),
                  _row("mid", "u0.800/light", 2.0, 0.8, 60), _row("short", "u0.800/light", 2.0, 1.0, 19)])
    assert p_instance_classes(plan) == {P0: {"long", "mid"}, P1: {"mid", "short"}, P2: {"mid", "short"}}
    reg, routing = _registry(plan), RoutingPolicy.from_plan(plan)
    assert {a.p.name for a in _send(reg, routing, LONG, 9)} == {P0}
    assert {a.p.name for a in _send(reg, routing, SHORT, 9)} == {P1, P2}


def test_without_uncached_tokens_in_the_plan_the_scenario_classifies():
    rows = [_row("long", HEAVY, 1.0, 1.0, None), _row("short", LIGHT, 2.0, 1.0, None)]
    plan = _plan(rows)
    assert RoutingPolicy.from_plan(plan).set_queues is None  # nothing to classify by: every P takes anything
    scenario = parse_scenario({
        "name": "sets", "model": "llama-3.1-8b",
        "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 8}}, {"name": "dc-b", "inventory": {"H100-SXM": 8}}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10.0, "rtt_ms": 30.0}],
        "workload": {"arrival_rps": 2.0, "classes": [
            {"name": "short", "share": 0.5, "input_tokens": 40, "output_tokens": 8, "hit_rate": 0.5},
            {"name": "long", "share": 0.5, "input_tokens": 400, "output_tokens": 8, "hit_rate": 0.5}]},
        "sla": {"ttft_p90_s": 5.0, "tpot_s": 0.05}})
    sets = SetQueues.from_plan(plan, scenario)
    assert dict(sets.classes) == {"long": 200, "short": 20}
    assert sets.request_class(len(LONG)) == "long" and sets.request_class(len(SHORT)) == "short"


def test_set_queue_names_parse_to_their_classes():
    assert set_queue_classes("set:hit-0-90+anomalous/u0.800") == {"hit-0-90", "anomalous"}
    assert set_queue_classes("u0.800/set:a+b+c", {"a+b", "c"}) == {"a+b", "c"}  # a class name holding '+'
    assert set_queue_classes("u0.800/mix") is None and set_queue_classes("u0.560/light") is None
    assert set_queue_classes(None) is None


@pytest.mark.parametrize("down", [False, True])
def test_a_served_plan_keeps_long_prompts_off_the_light_set(model_config, engine_config, down):
    """The in-process cluster on the fake transport: every long prompt prefills on the heavy set's
    instance, every short one on the light set's; with that instance gone, long prompts still finish,
    on a light instance, and the router counts each fallback."""
    config = ServingConfig.from_plan(SPLIT, heartbeat_s=None)
    with LocalCluster(placement(SPLIT), model_config, engine_config, config, transport="fake") as cluster:
        if down:
            cluster.router.unregister(P0)
        prompts = [LONG, SHORT, [7, *LONG[1:]], [256, *b"pack my box"], [9, *LONG[1:]], [256, *b"sphinx of"]]
        streams = [cluster.router.submit(p, {"max_new_tokens": 4, "stop_at_eos": False}) for p in prompts]
        assert all(len(s.result(timeout_s=60)) == 4 for s in streams)
        on = [(r.input_tokens, r.extra["instances"]["P"]) for r in cluster.router.records]
        assert len(on) == len(prompts)
        assert {p for n, p in on if n > 100} <= ({P1, P2} if down else {P0})
        assert {p for n, p in on if n < 100} <= {P1, P2}
        assert cluster.router.stats().get("set_fallbacks", 0) == (3 if down else 0)
        assert f"placer_set_fallbacks_total {3 if down else 0}" in prometheus_text(cluster.router.stats()).splitlines()


def test_the_flagship_plan_as_optimize_writes_it_keeps_its_heavy_and_light_sets_apart():
    """`placer optimize` of the bundled flagship puts hit-0-90 and anomalous in a heavy set and the other
    classes in a light one; from the plan alone (its rows' uncached_tokens) each class's prompts prefill
    on its set's instances only."""
    from placer.optimize import optimize
    from placer.specs import load_scenario

    scenario = load_scenario(Path(__file__).parents[2] / "examples" / "pdd-two-dc.yaml")
    plan = optimize(scenario)
    sets = p_instance_classes(plan)
    heavy = {name for name, classes in sets.items() if "hit-0-90" in classes}
    light = {name for name, classes in sets.items() if "hit-99-99.5" in classes}
    assert heavy and light and not heavy & light
    reg, routing = _registry(plan), RoutingPolicy.from_plan(plan)
    for k, c in enumerate(scenario.workload.classes):  # prompts of the class's uncached length, no hit
        prompt = [k, *(t % 250 for t in range(round((1 - c.hit_rate) * c.input_tokens) - 1))]
        used = {a.p.name for a in _send(reg, routing, prompt, 4)}
        assert used <= (heavy if c.name in ("hit-0-90", "anomalous") else light), c.name


def test_the_dry_run_says_which_p_instances_serve_each_set():
    from executor.describe import routing_lines

    lines = routing_lines(SPLIT, ServingConfig.from_plan(SPLIT))
    assert f"P set queues: long on {P0}; mid+short on {P1}, {P2}" in lines


def test_a_live_change_to_a_plan_with_sets_points_the_router_at_them(model_config, engine_config):
    """Started from a plan whose rows name no queue (every P takes anything), changed live to the split
    plan on the same instances: the router dispatches by the new plan's sets. Before, it kept the routing
    it started with, so long prompts still spread over the light instances."""
    unnamed = _plan([{**_row(c, LIGHT, 2.0, 1.0, u), "queue": None, "queue_instances": None}
                     for c, u in (("long", 200), ("mid", 60), ("short", 19))])
    config = ServingConfig.from_plan(unnamed, heartbeat_s=None)
    assert config.routing.set_queues is None
    with LocalCluster(placement(unnamed), model_config, engine_config, config, transport="fake") as cluster:
        report = cluster.apply_plan(SPLIT, grace_s=1, ready_timeout_s=10)
        assert report.failed is None
        assert dict(cluster.router.config.routing.set_queues.admits) == p_instance_classes(SPLIT)
        streams = [cluster.router.submit(p, {"max_new_tokens": 2, "stop_at_eos": False})
                   for p in (LONG, [7, *LONG[1:]], [9, *LONG[1:]], SHORT)]
        assert all(len(s.result(timeout_s=60)) == 2 for s in streams)
        on = [(r.input_tokens, r.extra["instances"]["P"]) for r in cluster.router.records]
        assert {p for n, p in on if n > 100} == {P0} and {p for n, p in on if n < 100} <= {P1, P2}
