"""A plan deployed on Ray: actors placed by datacenter and chip, serving PDD over a shaped line.

Marked `ray` (excluded from the default run; `pytest -m ray`). One local Ray whose
node emulates both datacenters, and one multi-node `ray.cluster_utils.Cluster` with
a node per datacenter. Kept small for a 2-core machine: tiny model, 3 instances.
"""

from __future__ import annotations

import dataclasses

import pytest

ray = pytest.importorskip("ray")

from executor.config import ServingConfig
from executor.deploy import RayDeployment, start_local_ray
from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams
from executor.placement import placement
from executor.request_log import BatchingRequestLog, MemorySink
from executor.routing import Pipeline
from executor.transport.shaping import LinkShape
from placer.plan import Plan
from tests.executor.support import only

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

PLAN = Plan.model_validate({
    "scenario": "two-dc",
    "pools": [{"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
              {"role": "RLD", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
              {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 2, "count": 1}],
    "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 25.0}],
})
LINE = {frozenset(("dc-a", "dc-b")): LinkShape(gbit_per_s=0.01, rtt_ms=40, jitter_ms=4)}
MC = ModelConfig()
EC = EngineConfig(backend="torch", block_size=4, num_blocks=256)
PROMPTS = [[256, *b"the quick brown fox jumps over the lazy dog; " * 2], [256, *b"pack my box with five dozen"]]
N = 64


def sampling() -> SamplingParams:
    return SamplingParams(max_new_tokens=N, stop_at_eos=False)


@pytest.fixture(scope="module")
def expected():
    ref = Engine.from_seed(MC, EC, seed=0, device="cpu")
    return [ref.generate(p, N, sampling()) for p in PROMPTS]


@pytest.fixture(scope="module")
def local_ray():
    start_local_ray(placement(PLAN), num_cpus=2, object_store_bytes=100 * 1024 * 1024)
    yield
    ray.shutdown()


def test_local_ray_emulates_two_datacenters_and_serves_every_pipeline(local_ray, expected):
    resources = ray.cluster_resources()
    assert resources["dc:dc-a"] == 2 and resources["dc:dc-b"] == 1 and resources["chip:B"] == 2
    sink = MemorySink()
    dep = RayDeployment(PLAN, MC, EC, ServingConfig.from_plan(PLAN, links=LINE, routing=only(Pipeline.P_RLD_MD)),
                        request_log=BatchingRequestLog(sink, batch_size=4))
    try:
        for pipeline in (Pipeline.P_RLD, Pipeline.P_RLD_MD, Pipeline.P_MD):  # P-RLD first: a cold cache
            dep.router.config = dataclasses.replace(dep.router.config, routing=only(pipeline))
            streams = [dep.router.submit(p, sampling()) for p in PROMPTS]
            assert [s.result(120) for s in streams] == expected, pipeline
            assert all(s.pipeline is pipeline for s in streams)
        stats = dep.stats()
        assert stats["instances"]["md-dc-b-B-tp2-0"]["kv_received_bytes"] > 0
        assert stats["links"]["dc-a<->dc-b"]["dc-a->dc-b"]["bytes"] > 0
        assert stats["router"]["completed"] == 6
    finally:
        dep.close()
    assert len(sink.records) == 6 and {r.pipeline for r in sink.records} == {"P-MD", "P-RLD-MD", "P-RLD"}


def test_multi_node_cluster_places_each_instance_on_its_datacenter_node(expected):
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"dc:dc-a": 2, "chip:A": 2}, "object_store_memory": store,
        "include_dashboard": False})
    node_b = cluster.add_node(num_cpus=1, resources={"dc:dc-b": 1, "chip:B": 2}, object_store_memory=store)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        dep = RayDeployment(PLAN, MC, EC, ServingConfig.from_plan(PLAN, links=LINE, routing=only(Pipeline.P_RLD_MD)))
        try:
            nodes = dep.node_of()
            head_id = ray.get_runtime_context().get_node_id()
            assert nodes["md-dc-b-B-tp2-0"] == node_b.node_id
            assert nodes["p-dc-a-A-tp1-0"] == nodes["rld-dc-a-A-tp1-0"] == head_id != node_b.node_id
            streams = [dep.router.submit(p, sampling()) for p in PROMPTS]
            assert [s.result(120) for s in streams] == expected
            assert all(s.record.extra["duplicates"] == 0 for s in streams)
        finally:
            dep.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
