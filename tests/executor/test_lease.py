"""Leases on KV staged on P: freed when a transfer never completes, kept while one makes progress."""

from __future__ import annotations

import time

import pytest

from executor.cluster import LocalCluster
from executor.engine import EngineConfig, SamplingParams
from executor.lease import Lease
from executor.placement import InstanceSpec
from executor.routing import Pipeline, RoutingPolicy
from executor.transport.base import Transfer
from executor.transport.messages import KVData, Ping
from tests.executor.support import serving

PROMPT = [256, *b"the quick brown fox jumps over the lazy dogs"]  # 45: a partial last block
SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("md0", "MD", "dc-b", "B")]
LEASE_S = 30.0  # the router's default lease




def test_a_lease_is_renewed_only_while_its_transfer_moves():
    lease = Lease.grant(1.0, now=0.0)
    t = Transfer("p0", "md0", Ping(0), 1000, deadline_s=600)
    lease.watch(t)
    for k in range(1, 6):  # 5 s of a slow transfer: 100 bytes a second, lease 1 s
        t.progress(100)
        assert lease.observe(now=float(k)) and not lease.expired(now=k + 0.5)
    assert not lease.observe(now=6.0)  # stalled
    assert lease.expired(now=6.1)


@pytest.fixture
def cluster(model_config):
    ec = EngineConfig(backend="torch", block_size=4, num_blocks=64)
    c = LocalCluster(SPECS, model_config, ec, serving(routing=RoutingPolicy(allowed=frozenset({Pipeline.P_MD}))),
                     transport="fake", threads=False, kv_deadline_s=600)
    c.network.auto = False  # transfers stay in flight until the test delivers them
    yield c
    c.close()


def _stage(c: LocalCluster):
    """Submit and let P prefill and serve MD's pull; returns P and the KVData transfer in flight."""
    c.router.submit(PROMPT, SamplingParams(max_new_tokens=4, stop_at_eos=False))
    p, md = c.worker("p0"), c.worker("md0")
    c.network.deliver()  # orders
    md.run_once()  # MD pulls
    c.network.deliver()
    p.run_once()
    p.run_once()  # prefill, serve the pull
    kv = [t for t in c.network.sent if isinstance(t.message, KVData)]
    assert len(kv) == 1 and len(p.staged) == 1
    return p, kv[0]


def test_staged_kv_of_a_transfer_that_never_completes_is_freed(cluster):
    p, _ = _stage(cluster)
    used = p.engine.blocks.pool.num_used
    now = time.monotonic()
    p.tick(now + 10)
    assert p.staged  # within the lease
    p.tick(now + LEASE_S + 600 + 1)  # lease + the transfer's deadline, no progress
    assert p.staged == {} and p.counters["leases_expired"] == 1
    assert p.engine.blocks.pool.num_used < used  # its partial block went back
    assert p.engine.blocks.pool.num_used == p.engine.blocks.radix.num_blocks  # only the cache is left


def test_a_slow_transfer_that_makes_progress_is_not_cut_by_the_lease(cluster):
    p, kv = _stage(cluster)
    now = time.monotonic()
    for k in range(1, 40):  # 40 × 20 s = 800 s: far past lease + deadline, but moving the whole time
        kv.progress(1)
        p.tick(now + 20.0 * k + 600)
        assert p.staged, f"cut at step {k}"
    assert p.counters["leases_renewed"] >= 39 and p.counters["leases_expired"] == 0
    p.tick(now + 20.0 * 40 + 600 + LEASE_S + 1)  # the transfer stalled: freed one lease later
    assert p.staged == {} and p.counters["leases_expired"] == 1
