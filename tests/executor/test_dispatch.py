"""Which instances serve an attempt: prefix hit, load, health, capacity; fallbacks (pure: no torch)."""

from __future__ import annotations

import pytest

from executor.admission import AdmissionPolicy, NoCapacity, Overloaded
from executor.dispatch import assign, pick
from executor.health import HealthMonitor
from executor.registry import InstanceInfo, InstanceRegistry
from executor.routing import Pipeline, RoutingPolicy
from tests.executor.support import only

PROMPT = list(range(32))


def _registry(*infos: InstanceInfo) -> InstanceRegistry:
    reg = InstanceRegistry(block_size=4, health=HealthMonitor(suspect_after=1, down_after=2))
    for info in infos:
        reg.add(info, joining=False)
    return reg


MD0, MD1 = InstanceInfo("md0", "MD", "dc-b"), InstanceInfo("md1", "MD", "dc-b")


def test_the_longest_predicted_hit_wins_then_the_least_loaded():
    reg = _registry(MD0, MD1)
    reg.load["md0"] = 1
    assert pick(reg, AdmissionPolicy(), [MD0, MD1], PROMPT).name == "md1"  # no hit anywhere: least loaded
    reg.indexes["md0"].insert(PROMPT)
    assert pick(reg, AdmissionPolicy(), [MD0, MD1], PROMPT).name == "md0"  # it holds the prefix, near the mean load


def test_a_prefix_every_request_shares_does_not_pile_them_on_one_instance():
    """A system prompt all requests share: the instance that cached it first wins only while its load
    stays within 1.25 x the mean (consistent hashing with bounded loads), so both instances serve."""
    reg = _registry(MD0, MD1)
    reg.indexes["md0"].insert(PROMPT)
    reg.load["md0"] = 3
    assert pick(reg, AdmissionPolicy(), [MD0, MD1], PROMPT).name == "md1"  # 4 > ceil(1.25 x 4 / 2)
    for _ in range(40):  # requests arrive and stay
        reg.load[pick(reg, AdmissionPolicy(), [MD0, MD1], PROMPT).name] += 1
    total = reg.load["md0"] + reg.load["md1"]
    assert reg.load["md0"] > reg.load["md1"]  # the cache still leans the split ...
    assert reg.load["md0"] <= 1.25 * total / 2 + 1  # ... within the bound (unbounded: 43 and 0)


def test_suspect_instances_come_last_and_full_ones_never():
    reg = _registry(MD0, MD1)
    reg.indexes["md0"].insert(PROMPT)
    reg.health.sent("md0")  # one missed heartbeat: SUSPECT
    assert pick(reg, AdmissionPolicy(), [MD0, MD1], PROMPT).name == "md1"
    reg.load["md1"] = 2
    assert pick(reg, AdmissionPolicy(max_per_instance=2), [MD0, MD1], PROMPT).name == "md0"
    reg.load["md0"] = 2
    with pytest.raises(Overloaded, match="limit of 2"):
        pick(reg, AdmissionPolicy(max_per_instance=2), [MD0, MD1], PROMPT)
    with pytest.raises(NoCapacity, match="main decode"):
        pick(reg, AdmissionPolicy(), [], PROMPT, role="MD")


def test_an_attempt_gets_a_pipeline_the_live_instances_can_run():
    reg = _registry(InstanceInfo("p0", "P", "dc-a"), InstanceInfo("rld0", "RLD", "dc-a"), MD0)
    a = assign(reg, only(Pipeline.P_RLD_MD), AdmissionPolicy(), PROMPT, 8, exclude=set(), prefer_relay=False)
    assert (a.pipeline, a.instances, a.degraded) == (Pipeline.P_RLD_MD, {"P": "p0", "RLD": "rld0", "MD": "md0"}, False)
    retry = assign(reg, only(Pipeline.P_MD), AdmissionPolicy(), PROMPT, 8, exclude={"md0"}, prefer_relay=True)
    assert retry.pipeline is Pipeline.P_RLD and retry.md is None  # the fallback: RLD in P's datacenter
    degraded = assign(reg, RoutingPolicy(allowed=frozenset({Pipeline.P_D})), AdmissionPolicy(), PROMPT, 8,
                      exclude=set(), prefer_relay=False)
    assert degraded.degraded and degraded.pipeline is Pipeline.P_RLD  # no D up: served anyway
    with pytest.raises(NoCapacity, match="no decoder"):
        assign(reg, only(Pipeline.P_MD), AdmissionPolicy(), PROMPT, 8, exclude={"rld0", "md0"}, prefer_relay=False)
