"""Instance kills and a live plan change on Ray (marked `ray`; `pytest -m ray`).

A multi-node `ray.cluster_utils.Cluster` (a node per datacenter): the MD actor is
killed mid-stream (the router learns it from missed heartbeats) and RLD finishes the
request with no gap and no duplicate; the MD restarts under its name at a new
address and serves again. A local Ray emulating both datacenters: a plan change
(add an MD, remove the RLD) while requests stream loses none.
"""

from __future__ import annotations

import threading
import time

import pytest

ray = pytest.importorskip("ray")

from executor.config import ServingConfig
from executor.deploy import RayDeployment, start_local_ray
from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams
from executor.placement import placement
from executor.routing import Pipeline, RoutingPolicy
from executor.transport.shaping import LinkShape
from placer.pdd import FilterRule
from placer.plan import Plan
from tests.executor.support import only

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def _plan(rld: int, md: int) -> Plan:
    return Plan.model_validate({"scenario": "two-dc", "pools": [
        {"role": "P", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": 1},
        {"role": "RLD", "datacenter": "dc-a", "chip": "A", "tp": 1, "count": rld},
        {"role": "MD", "datacenter": "dc-b", "chip": "B", "tp": 1, "count": md}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s_capacity": 25.0}]})


LINE = {frozenset(("dc-a", "dc-b")): LinkShape(gbit_per_s=1.0, rtt_ms=10, jitter_ms=1)}
MC = ModelConfig(num_layers=2, hidden_size=64, num_q_heads=4, num_kv_heads=2, head_dim=16, intermediate_size=128)
EC = EngineConfig(backend="torch", block_size=4, num_blocks=1024)
PROMPT = [256, *b"the quick brown fox jumps over the lazy dog"]
N = 400


def sampling(n: int = N) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, stop_at_eos=False)


@pytest.fixture(scope="module")
def reference():
    ref = Engine.from_seed(MC, EC, seed=0, device="cpu")
    return lambda prompt=PROMPT, n=N: ref.generate(prompt, n, sampling(n))


def test_md_actor_killed_mid_stream_on_a_multi_node_cluster_is_finished_by_rld(reference):
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"dc:dc-a": 2, "chip:A": 2}, "object_store_memory": store,
        "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={"dc:dc-b": 2, "chip:B": 2}, object_store_memory=store)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        plan = _plan(1, 1)
        dep = RayDeployment(plan, MC, EC, ServingConfig.from_plan(plan, links=LINE, routing=only(Pipeline.P_MD),
                                                                  heartbeat_s=0.2))
        md = next(s.name for s in dep.specs if s.role == "MD")
        try:
            stream = dep.router.submit(PROMPT, sampling())
            rid = stream.request_id
            end = time.monotonic() + 120
            while not (len(stream.tokens) >= 10 and md in dep.router.live[rid].streamers):
                assert time.monotonic() < end and not stream.closed.is_set()
                time.sleep(0.005)
            dep.kill(md, tell_router=False)  # the process is gone; heartbeats find out
            assert stream.result(120) == reference()
            idx = [e.index for e in stream.events(timeout_s=1) if e.kind == "token"]
            assert idx == list(range(N))
            assert stream.record.extra["migrations"] == 1 and stream.record.extra["instances"].get("RLD")
            old = dep.router.instances[md].address
            dep.restart(md)  # same name, new actor, new address
            assert dep.router.instances[md].address != old
            end = time.monotonic() + 60
            while md in dep.router.joining:
                assert time.monotonic() < end
                time.sleep(0.05)
            again = dep.router.submit([256, *b"after the restart"], sampling(16))
            assert again.result(120) == reference([256, *b"after the restart"], 16)
            assert again.record.extra["instances"]["MD"] == md
        finally:
            dep.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_live_plan_change_on_local_ray_loses_no_request(reference):
    if ray.is_initialized():
        ray.shutdown()
    start_local_ray(placement(_plan(1, 2)), num_cpus=2, object_store_bytes=100 * 1024 * 1024)
    try:
        policy = RoutingPolicy(direct_min_hit_rate=0.99, filter_rule=FilterRule(1, 1.0, 9))
        plan = _plan(1, 1)
        dep = RayDeployment(plan, MC, EC, ServingConfig.from_plan(plan, links=LINE, routing=policy, heartbeat_s=0.2))
        try:
            prompts = [[256, *f"{k}: a request during the change".encode()] for k in range(16)]
            streams = []

            def client():
                for k, p in enumerate(prompts):
                    n = 8 if k % 2 else 24
                    streams.append((p, n, dep.router.submit(p, sampling(n))))
                    time.sleep(0.05)

            t = threading.Thread(target=client)
            t.start()
            time.sleep(0.2)
            report = dep.apply_plan(_plan(0, 2), grace_s=30)
            t.join(60)
            assert len(report.joined) == 1 and len(report.diff.remove) == 1 and report.not_ready == []
            assert [s.result(120) for _, _, s in streams] == [reference(p, n) for p, n, _ in streams]
            assert sorted(s.role for s in dep.specs) == ["MD", "MD", "P"]
        finally:
            dep.close()
    finally:
        ray.shutdown()
