"""A worker reports the CPU time of its own thread (``RoleWorker.thread_cpu_s``): what the role costs
on the thread that serves it, which bench/measure_runtime.py charges to the decoder's steps."""

from __future__ import annotations

import time

import pytest

from executor.cluster import LocalCluster
from executor.engine import SamplingParams
from executor.placement import InstanceSpec
from executor.routing import Pipeline, RoutingPolicy
from tests.executor.support import serving

pytestmark = pytest.mark.skipif(not hasattr(time, "pthread_getcpuclockid"), reason="no per-thread CPU clock")


def test_a_decoder_thread_cpu_grows_with_the_tokens_it_serves_and_not_with_other_threads(model_config,
                                                                                          engine_config):
    specs = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("d0", "D", "dc-a", "A")]
    config = serving(routing=RoutingPolicy(allowed=frozenset({Pipeline.P_D})))
    with LocalCluster(specs, model_config, engine_config, config, transport="tcp") as cluster:
        decoder = cluster.instances["d0"].worker
        before = decoder.thread_cpu_s()
        assert before is not None
        busy_until = time.thread_time() + 0.2  # this thread's work is not the decoder's
        while time.thread_time() < busy_until:
            pass
        assert decoder.thread_cpu_s() - before < 0.1
        stream = cluster.router.submit([256, *b"a prompt of a few tokens"],
                                       SamplingParams(max_new_tokens=32, stop_at_eos=False))
        assert stream.closed.wait(60) and stream.error is None
        steps = sum(f.cpu_s for f in decoder.engine.forward_log.records("decode"))
        assert steps > 0
        # its thread ran every decode step of the request, and some more (the import, the messages)
        assert decoder.thread_cpu_s() - before >= steps
    assert decoder.thread_cpu_s() is None  # stopped with the cluster
