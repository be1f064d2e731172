"""Aggregated serving (role A, pipeline A) in the executor: plans with only A pools, and A beside
P/MD, served by a `LocalCluster`; the split the plan's routes ask for; faults on an A instance.

Every served output is checked against the single engine's greedy `generate` on the same
prompt: an A instance prefills and decodes in its own engine, so the tokens must be the same.
"""

from __future__ import annotations

import pytest

from executor.admission import NoCapacity
from executor.cluster import LocalCluster, make_worker
from executor.config import ServingConfig
from executor.engine import Engine, SamplingParams
from executor.placement import front_datacenter, placement
from executor.roles.a import AggregatedWorker
from executor.routing import Pipeline, RoutingPolicy, agg_draw
from placer.plan import Plan
from placer.specs import parse_scenario

N = 12
PROMPTS = [[256, *b"the quick brown fox"], [256, *b"pack my box with five dozen liquor jugs"],
           [256, *b"how vexingly quick daft zebras jump"], [256, *b"sphinx of black quartz, judge my vow"],
           [256, *b"a wizard's job is to vex chumps quickly"], [256, *b"waltz, bad nymph, for quick jigs vex"]]


def _plan(pools: list[dict], routes: list[dict]) -> Plan:
    return Plan.model_validate({"scenario": "agg", "pools": pools, "routes": routes,
                                "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 10.0}]
                                if any(p["datacenter"] == "dc-b" for p in pools) else []})


A_ONLY = _plan([{"role": "A", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 2}],
               [{"request_class": "c", "pipeline": "A", "src": "dc-a", "dst": "dc-a", "rps": 2.0}])
MIXED = _plan([{"role": "P", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 1},
               {"role": "MD", "datacenter": "dc-b", "chip": "Y", "tp": 1, "count": 1},
               {"role": "A", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 1}],
              [{"request_class": "c", "pipeline": "A", "src": "dc-a", "dst": "dc-a", "rps": 1.0},
               {"request_class": "c", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-b", "rps": 1.0}])


def greedy(n: int = N) -> dict:
    return {"max_new_tokens": n, "stop_at_eos": False}


@pytest.fixture
def reference(model_config, engine_config):
    engine = Engine.from_seed(model_config, engine_config, seed=0, device="cpu")
    return lambda prompt, n=N: engine.generate(prompt, n, SamplingParams(max_new_tokens=n, stop_at_eos=False))


def cluster_for(plan: Plan, model_config, engine_config, **kw) -> LocalCluster:
    config = ServingConfig.from_plan(plan, heartbeat_s=None)
    return LocalCluster(placement(plan), model_config, engine_config, config, **kw)


@pytest.mark.parametrize("transport", ["fake", "tcp"])
def test_a_only_plan_serves_the_engines_greedy_output_on_pipeline_a(model_config, engine_config, reference,
                                                                      transport):
    with cluster_for(A_ONLY, model_config, engine_config, transport=transport) as cluster:
        streams = [cluster.router.submit(p, greedy()) for p in PROMPTS]
        assert [s.result(timeout_s=60) for s in streams] == [reference(p) for p in PROMPTS]
        records = list(cluster.router.records)
        assert {r.pipeline for r in records} == {"A"}
        assert all(set(r.extra["instances"]) == {"A"} for r in records)  # one instance, nothing else
        assert all(r.ttft_s is not None and r.output_tokens == N for r in records)
        used = {r.extra["instances"]["A"] for r in records}
        assert used == {s.name for s in placement(A_ONLY)}  # both A instances took requests (least loaded)
        assert sum(w.counters["finished_here"] for w in cluster.workers("A")) == len(PROMPTS)


def test_a_next_turn_hits_its_own_radix_cache_and_is_routed_back_to_it(model_config, engine_config, reference):
    """Turn 2 carries turn 1 and its answer: the router's prefix index sends it to the A instance
    that served turn 1, whose radix cache holds the whole blocks of prompt and output."""
    with cluster_for(A_ONLY, model_config, engine_config, transport="fake") as cluster:
        first = cluster.router.submit(PROMPTS[0], greedy())
        answer = first.result(timeout_s=60)
        turn2 = PROMPTS[0] + answer + list(b" and then?")
        second = cluster.router.submit(turn2, greedy())
        assert second.result(timeout_s=60) == reference(turn2)
        r1, r2 = cluster.router.records
        assert r2.extra["instances"] == r1.extra["instances"]
        block = engine_config.block_size
        assert r2.prefix_hit_tokens >= (len(PROMPTS[0]) + N - 1) // block * block
        assert r2.prefix_hit_tokens == r2.extra["a_cached_tokens"] > 0


def test_mixed_plan_splits_as_its_routes_say_and_every_output_is_the_engines(model_config, engine_config,
                                                                            reference):
    """Half the plan's rps on A, half on P-MD: the six requests go three and three, each exact."""
    with cluster_for(MIXED, model_config, engine_config, transport="tcp") as cluster:
        streams = [cluster.router.submit(p, greedy()) for p in PROMPTS]
        assert [s.result(timeout_s=60) for s in streams] == [reference(p) for p in PROMPTS]
        by_pipeline = [r.pipeline for r in cluster.router.records]
        assert sorted(by_pipeline) == ["A"] * 3 + ["P-MD"] * 3
        for r in cluster.router.records:
            assert set(r.extra["instances"]) == ({"A"} if r.pipeline == "A" else {"P", "MD"})
        assert cluster.router.stats()["pipeline_A"] == 3


def test_with_its_scenario_a_mixed_plan_sends_each_class_where_its_routes_go(model_config, engine_config,
                                                                             reference):
    """The plan serves short prompts aggregated and long ones P → MD; given the scenario, the router
    matches each request to its nearest class and follows that class's route, every time."""
    pools = [{"role": r, "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1} for r in ("A", "P", "MD")]
    plan = _plan(pools, [{"request_class": "short", "pipeline": "A", "src": "dc-a", "dst": "dc-a", "rps": 1.0},
                         {"request_class": "long", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-a", "rps": 1.0}])
    scenario = parse_scenario({
        "name": "agg", "model": "llama-3.1-8b", "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 8}}],
        "workload": {"arrival_rps": 2.0, "classes": [
            {"name": "short", "share": 0.5, "input_tokens": 24, "output_tokens": N, "hit_rate": 0.0},
            {"name": "long", "share": 0.5, "input_tokens": 240, "output_tokens": N, "hit_rate": 0.0}]},
        "sla": {"ttft_p90_s": 5.0, "tpot_s": 0.05}})
    config = ServingConfig.from_plan(plan, scenario, heartbeat_s=None)
    long_prompts = [p * 6 for p in PROMPTS[:3]]
    with LocalCluster(placement(plan), model_config, engine_config, config, transport="fake") as cluster:
        streams = [cluster.router.submit(p, greedy()) for pair in zip(PROMPTS[:3], long_prompts) for p in pair]
        want = [reference(p) for pair in zip(PROMPTS[:3], long_prompts) for p in pair]
        assert [s.result(timeout_s=60) for s in streams] == want
        assert [s.pipeline.value for s in streams] == ["A", "P-MD"] * 3


def test_mixed_plan_with_no_p_left_serves_everything_aggregated(model_config, engine_config, reference):
    with cluster_for(MIXED, model_config, engine_config, transport="fake") as cluster:
        cluster.router.unregister("p-dc-a-X-tp1-0")
        streams = [cluster.router.submit(p, greedy()) for p in PROMPTS[:3]]
        assert [s.result(timeout_s=60) for s in streams] == [reference(p) for p in PROMPTS[:3]]
        assert [r.pipeline for r in cluster.router.records] == ["A"] * 3


def test_a_full_spills_to_the_disaggregated_side_but_an_a_only_plan_says_overloaded(model_config, engine_config,
                                                                                    reference):
    """At `max_per_instance` a request the share sends to A goes P → MD instead (it can run there);
    with only A pools there is nowhere to spill, so the client gets 429 (`Overloaded`)."""
    import dataclasses

    from executor.admission import AdmissionPolicy, Overloaded

    one_each = AdmissionPolicy(max_per_instance=1)
    with cluster_for(MIXED, model_config, engine_config, transport="fake", threads=False) as cluster:
        cluster.router.config = dataclasses.replace(cluster.router.config, admission=one_each)
        cluster.router.registry.load["a-dc-a-X-tp1-0"] += 1  # the one A instance is busy
        first = cluster.router.submit(PROMPTS[0], greedy())  # draw 0.618: P-MD by the share
        cluster.run_until(lambda: not cluster.router.live)
        second = cluster.router.submit(PROMPTS[1], greedy())  # draw 0.236: A by the share, but A is full
        assert (first.pipeline, second.pipeline) == (Pipeline.P_MD, Pipeline.P_MD)
        cluster.run_until(lambda: not cluster.router.live)
        assert second.result(timeout_s=1) == reference(PROMPTS[1])
    with cluster_for(A_ONLY, model_config, engine_config, transport="fake", threads=False) as cluster:
        cluster.router.config = dataclasses.replace(cluster.router.config, admission=one_each)
        for prompt in PROMPTS[:2]:
            cluster.router.submit(prompt, greedy())
        with pytest.raises(Overloaded, match="A instance is at its limit"):
            cluster.router.submit(PROMPTS[2], greedy())


def test_a_killed_mid_stream_migrates_to_another_a_without_a_gap(model_config, engine_config, reference):
    """The A instance dies after some tokens reached the client: another A prefills prompt + what
    was delivered and streams on from the next index (the same greedy chain)."""
    n = 40
    with cluster_for(A_ONLY, model_config, engine_config, transport="fake", threads=False) as cluster:
        stream = cluster.router.submit(PROMPTS[1], greedy(n))
        victim = cluster.router.live[stream.request_id].instances["A"]
        cluster.run_until(lambda: cluster.router.live[stream.request_id].assembler.next_index >= 5)
        cluster.kill(victim, tell_router=True)
        cluster.run_until(lambda: stream.request_id not in cluster.router.live)
        assert stream.result(timeout_s=1) == reference(PROMPTS[1], n)
        record = cluster.router.records[-1]
        assert record.extra["migrations"] == 1 and record.pipeline == "A"
        assert record.extra["instances"]["A"] != victim


def test_cancel_frees_the_a_instances_blocks(model_config, engine_config):
    with cluster_for(A_ONLY, model_config, engine_config, transport="fake", threads=False) as cluster:
        stream = cluster.router.submit(PROMPTS[2], greedy(200))
        name = cluster.router.live[stream.request_id].instances["A"]
        worker = cluster.worker(name)
        cluster.run_until(lambda: cluster.router.live[stream.request_id].assembler.next_index >= 3)
        assert cluster.router.cancel(stream.request_id)
        cluster.settle()
        assert worker.aggs == {} and not worker.engine.scheduler.has_work()
        assert worker.engine.blocks.num_available == engine_config.num_blocks  # nothing pinned


def test_a_refuses_a_request_beyond_its_pool_with_an_error_not_a_hang(model_config, engine_config):
    with cluster_for(A_ONLY, model_config, engine_config, transport="fake") as cluster:
        worker = next(iter(cluster.workers("A")))
        too_long = [256] + [65] * (engine_config.block_size * engine_config.num_blocks)
        from executor.transport.messages import PrefillOrder, RequestError

        sent = []
        worker.send = lambda dst, msg, deadline_s=None: sent.append(msg)  # what it would tell the router
        worker.on_order("router", PrefillOrder("r1", too_long, greedy(), [], "router"))
        worker.on_order("router", PrefillOrder("r2", PROMPTS[0], greedy(), ["md-x"], "router"))
        assert [type(m) for m in sent] == [RequestError, RequestError]
        assert "KV blocks" in sent[0].error and "consumers" in sent[1].error and worker.aggs == {}


def test_no_a_instance_up_is_no_capacity(model_config, engine_config):
    with cluster_for(A_ONLY, model_config, engine_config, transport="fake") as cluster:
        for spec in placement(A_ONLY):
            cluster.router.unregister(spec.name)
        with pytest.raises(NoCapacity, match="instance is up"):
            cluster.router.submit(PROMPTS[0], greedy())


# ---- policy and placement (no engines) -------------------------------------------------------


def test_routing_from_an_a_only_plan_allows_only_pipeline_a_and_the_front_is_its_datacenter():
    policy = RoutingPolicy.from_plan(A_ONLY)
    assert policy.allowed == {Pipeline.P_A} and policy.agg_share == 1.0
    assert front_datacenter(A_ONLY) == "dc-a"
    assert not Pipeline.P_A.uses_main and not Pipeline.P_A.uses_relay
    assert isinstance(make_worker("A", "a0", _FakeEngine(), _FakeEndpoint()), AggregatedWorker)


def test_the_split_follows_the_plans_share_per_class_when_the_scenario_is_known():
    """Short prompts all on A, long ones all on P-MD in the plan: a request is matched to its
    nearest class, so a short one always goes to A and a long one never does."""
    plan = _plan([{"role": "P", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 1},
                  {"role": "MD", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 1},
                  {"role": "A", "datacenter": "dc-a", "chip": "X", "tp": 1, "count": 1}],
                 [{"request_class": "short", "pipeline": "A", "src": "dc-a", "dst": "dc-a", "rps": 3.0},
                  {"request_class": "long", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-a", "rps": 1.0}])
    scenario = parse_scenario({
        "name": "agg", "model": "llama-3.1-8b", "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 8}}],
        "workload": {"arrival_rps": 4.0, "classes": [
            {"name": "short", "share": 0.75, "input_tokens": 512, "output_tokens": 256, "hit_rate": 0.0},
            {"name": "long", "share": 0.25, "input_tokens": 32768, "output_tokens": 256, "hit_rate": 0.0}]},
        "sla": {"ttft_p90_s": 5.0, "tpot_s": 0.05}})
    policy = RoutingPolicy.from_plan(plan, scenario)
    assert policy.agg_share == pytest.approx(0.75)
    draws = [agg_draw(n) for n in range(1, 201)]
    assert all(policy.wants_aggregated(600, 0, 200, d) for d in draws)
    assert not any(policy.wants_aggregated(30000, 0, 300, d) for d in draws)
    without = RoutingPolicy.from_plan(plan)  # no scenario: the plan's share over all requests
    assert sum(without.wants_aggregated(600, 0, 200, d) for d in draws) == pytest.approx(150, abs=2)


class _FakeEngine:
    model_config = None
    scheduler = None


class _FakeEndpoint:
    name, datacenter = "a0", "dc-a"

    def set_handler(self, handler) -> None:
        pass


def test_an_aggregated_deployment_reports_healthy(model_config, engine_config):
    """/health says ok when requests can be served end to end: an A instance alone suffices."""
    import warnings

    from executor.server import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    with cluster_for(A_ONLY, model_config, engine_config, transport="fake") as cluster, \
            TestClient(create_app(cluster.router)) as client:
        body = client.get("/health").json()
    assert body == {"status": "ok", "instances": {"A": 2}}
