"""The fault rule on its own, then faults injected while requests stream (in-process fake
channel, workers pumped by the test).

The router's heartbeats run on its own thread in real time (50 ms, DOWN after 3
misses); everything else is driven here. Each test checks what a client sees: the
same tokens as a fault-free greedy run, no gap and no duplicate at a seam, or a
clear error event — never a hang.
"""

from __future__ import annotations

import pytest

from executor.cluster import LocalCluster
from executor.engine import Engine, SamplingParams
from executor.faults import FaultAction, fault_action
from executor.health import HealthMonitor, PeerState
from executor.live import LiveRequest
from executor.placement import InstanceSpec
from executor.routing import Pipeline
from executor.stream import RequestStream
from tests.executor.support import only, serving

PROMPT = [256, *b"the quick brown fox jumps over the lazy dog"]
MAX_NEW = 40
P0, RLD0 = InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("rld0", "RLD", "dc-a", "A")
MD0, MD1 = InstanceSpec("md0", "MD", "dc-b", "B"), InstanceSpec("md1", "MD", "dc-b", "B")


def _live(delivered: int, streamers: set[str], attempt: int = 0) -> LiveRequest:
    """A P-RLD-MD request on p0, rld0, md0 with `delivered` tokens at the client."""
    live = LiveRequest(RequestStream("r", Pipeline.P_RLD_MD, loop=None), PROMPT, {"max_new_tokens": MAX_NEW})
    live.instances, live.streamers, live.attempt = {"P": "p0", "RLD": "rld0", "MD": "md0"}, streamers, attempt
    live.assembler.add(0, list(range(delivered)))
    return live


@pytest.mark.parametrize("suspect, delivered, streamers, graceful, want", [
    ("p0", 0, set(), False, FaultAction.RETRY),
    ("p0", 5, {"rld0"}, False, FaultAction.IGNORE),  # the decoders hold the KV
    ("p0", 5, {"rld0"}, True, FaultAction.MIGRATE),  # leaving: what it holds moves
    ("rld0", 5, {"rld0", "md0"}, False, FaultAction.IGNORE),  # MD streams: the handoff is done
    ("rld0", 0, set(), False, FaultAction.RETRY),
    ("rld0", 5, {"rld0"}, False, FaultAction.FAIL),  # never a silent re-run
    ("md0", 0, set(), False, FaultAction.RETRY),
    ("md0", 5, {"rld0", "md0"}, False, FaultAction.MIGRATE),
    ("md9", 5, {"rld0"}, False, FaultAction.IGNORE),  # not part of this attempt
])
def test_the_fault_rule(suspect, delivered, streamers, graceful, want):
    assert fault_action(_live(delivered, streamers), suspect, graceful=graceful, max_attempts=4) is want


def test_no_attempt_past_the_limit():
    assert fault_action(_live(0, set(), attempt=3), "md0", graceful=False, max_attempts=4) is FaultAction.GIVE_UP


def _sampling(n: int = MAX_NEW) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, stop_at_eos=False)


@pytest.fixture
def reference(model_config, engine_config):
    engine = Engine.from_seed(model_config, engine_config, seed=0, device="cpu")
    return lambda prompt=PROMPT, n=MAX_NEW: engine.generate(prompt, n, _sampling(n))


@pytest.fixture
def cluster(model_config, engine_config):
    made = []

    def make(specs, policy, **kw) -> LocalCluster:
        health = HealthMonitor(interval_s=0.05, suspect_after=2, down_after=3)
        kw.setdefault("heartbeat_s", 0.05)
        c = LocalCluster(specs, model_config, engine_config, serving(routing=policy, **kw), transport="fake",
                         threads=False, health=health)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def events_of(stream) -> list:
    return list(stream.events(timeout_s=1))


def assert_clean(stream, expected):
    """The client's view: every index once, in order, then the end; equal to the fault-free run."""
    evs = events_of(stream)
    toks = [e for e in evs if e.kind == "token"]
    assert [e.index for e in toks] == list(range(len(expected)))
    assert [e.token for e in toks] == expected
    assert evs[-1].kind == "end"
    assert stream.record.extra["conflicts"] == 0


@pytest.mark.parametrize("case", ["P-MD to RLD", "P-RLD-MD after handoff to RLD", "P-MD to another MD"])
def test_killed_md_mid_stream_is_finished_elsewhere_without_gap_or_duplicate(cluster, reference, case):
    if case == "P-MD to another MD":
        c = cluster([P0, MD0, MD1], only(Pipeline.P_MD))
    elif case == "P-MD to RLD":
        c = cluster([P0, RLD0, MD0], only(Pipeline.P_MD))
    else:
        c = cluster([P0, RLD0, MD0], only(Pipeline.P_RLD_MD))
    stream = c.router.submit(PROMPT, _sampling())
    holder = stream.record.extra["instances"]["MD"] if stream.record else c.router.live[stream.request_id].instances["MD"]
    c.run_until(lambda: len(stream.tokens) >= 15 and holder in c.router.live[stream.request_id].streamers)
    c.kill(holder)  # no notice: the heartbeats find out
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    assert_clean(stream, reference())
    assert stream.record.extra["migrations"] == 1
    assert c.router.health.state(holder) is PeerState.DOWN
    stats = c.router.stats()
    assert stats["migrations"] == 1 and stats["completed"] == 1
    takeover = stream.record.extra["instances"]
    assert holder not in takeover.values()
    if case == "P-MD to another MD":
        assert takeover["MD"] == "md1"
    else:
        assert takeover.get("RLD") == "rld0" and stats["fallbacks"] == 1
    after = c.router.submit(PROMPT, _sampling(8))  # new requests avoid the dead MD
    c.run_until(lambda: after.closed.is_set())
    assert after.result() == reference(PROMPT, 8) and holder not in after.record.extra["instances"].values()


def test_wan_partition_rld_finishes_md_marked_down_and_back_after_heal(cluster, reference):
    c = cluster([P0, RLD0, MD0], only(Pipeline.P_MD))
    c.network.partition("dc-a", "dc-b")
    stream = c.router.submit(PROMPT, _sampling())
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    assert_clean(stream, reference())
    assert c.router.health.state("md0") is PeerState.DOWN
    assert stream.record.extra["instances"]["RLD"] == "rld0" and c.router.stats()["fallbacks"] >= 1
    during = c.router.submit(PROMPT, _sampling(8))  # while down: served in dc-a only
    assert during.pipeline is Pipeline.P_RLD
    c.run_until(lambda: during.closed.is_set())
    assert during.result() == reference(PROMPT, 8)
    c.network.heal_partition("dc-a", "dc-b")
    c.run_until(lambda: c.router.health.state("md0") is PeerState.UP, timeout_s=5)
    assert c.router.stats()["peers_recovered"] == 1
    healed = c.router.submit(PROMPT, _sampling(8))
    assert healed.pipeline is Pipeline.P_MD
    c.run_until(lambda: healed.closed.is_set())
    assert healed.result() == reference(PROMPT, 8)


def test_stalled_kv_transfer_falls_back_to_rld_within_the_stall_deadline(cluster, reference):
    c = cluster([P0, RLD0, MD0], only(Pipeline.P_MD), heartbeat_s=None, stall_s=1.0)
    c.network.drop("md0")  # MD is unreachable, but nothing tells the router: only the stall does
    stream = c.router.submit(PROMPT, _sampling())
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    assert_clean(stream, reference())
    assert c.router.stats()["stalls"] >= 1 and stream.record.extra["instances"]["RLD"] == "rld0"


def test_rld_dying_before_the_first_token_is_retried(cluster, reference):
    c = cluster([P0, RLD0, InstanceSpec("rld1", "RLD", "dc-a", "A")], only(Pipeline.P_RLD))
    c.kill("rld0")  # the router does not know yet: its order cannot be delivered
    stream = c.router.submit(PROMPT, _sampling())
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    assert_clean(stream, reference())
    assert stream.record.extra["retries"] == 1 and stream.record.extra["instances"]["RLD"] == "rld1"


def test_p_dying_before_the_first_token_is_retried_on_another_p(cluster, reference):
    c = cluster([P0, InstanceSpec("p1", "P", "dc-a", "A"), RLD0], only(Pipeline.P_RLD))
    stream = c.router.submit(PROMPT, _sampling())
    first_p = c.router.live[stream.request_id].instances["P"]
    c.kill(first_p)  # before it prefilled: nothing reached the client
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    assert_clean(stream, reference())
    assert stream.record.extra["retries"] == 1 and stream.record.extra["instances"]["P"] != first_p


def test_rld_dying_after_the_first_token_is_a_clear_error_not_a_duplicate(cluster, reference):
    c = cluster([P0, RLD0, InstanceSpec("rld1", "RLD", "dc-a", "A")], only(Pipeline.P_RLD))
    stream = c.router.submit(PROMPT, _sampling())
    holder = c.router.live[stream.request_id].instances["RLD"]
    c.run_until(lambda: len(stream.tokens) >= 5)
    c.kill(holder)
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    evs = events_of(stream)
    toks = [e for e in evs if e.kind == "token"]
    assert evs[-1].kind == "error" and "not retried" in evs[-1].error and holder in evs[-1].error
    assert [e.index for e in toks] == list(range(len(toks)))  # what was shown is a clean prefix
    assert [e.token for e in toks] == reference()[: len(toks)]
    assert c.router.stats()["failures_after_first_token"] == 1
    with pytest.raises(RuntimeError, match="not retried"):
        stream.result()


def test_restarted_instance_with_a_new_address_is_rehandshaked_and_the_dead_one_gets_nothing(cluster, reference):
    c = cluster([P0, RLD0, MD0], only(Pipeline.P_MD))
    old_ep = c.worker("md0").endpoint
    c.kill("md0", tell_router=True)
    assert c.router.health.state("md0") is PeerState.DOWN
    sent_before = len(c.network.sent)
    fresh = c.restart("md0")
    assert fresh.worker.endpoint is not old_ep and fresh.info.address != old_ep.address
    stats = c.router.stats()
    assert stats["restarts_seen"] == 1 and stats["joined"] == 1  # routable only once the new one answered
    c.run_until(lambda: "md0" not in c.router.joining, timeout_s=5)  # answered its handshake ping
    stream = c.router.submit(PROMPT, _sampling())
    assert stream.pipeline is Pipeline.P_MD
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    assert_clean(stream, reference())
    after = c.network.sent[sent_before:]
    assert all(t.state.value == "done" for t in after if t.dst == "md0")  # every send reached the new one
    assert old_ep.handler is not None and old_ep.closed


def test_every_request_ends_even_when_no_instance_can_take_it_over(cluster):
    c = cluster([P0, MD0], only(Pipeline.P_MD), max_attempts=2)
    stream = c.router.submit(PROMPT, _sampling())
    c.run_until(lambda: len(stream.tokens) >= 3)
    c.kill("md0")
    c.run_until(lambda: stream.closed.is_set(), timeout_s=10)
    assert stream.error is not None and "no instance left" in stream.error
    assert c.router.live == {}


def test_restart_over_tcp_reconnects_to_the_new_address(model_config, engine_config, reference):
    md_near = InstanceSpec("md0", "MD", "dc-a", "A")  # real sockets, no WAN line needed
    config = serving(routing=only(Pipeline.P_MD), heartbeat_s=0.05)
    c = LocalCluster([P0, md_near], model_config, engine_config, config, transport="tcp", threads=True,
                     health=HealthMonitor(interval_s=0.05, suspect_after=2, down_after=3))
    try:
        first = c.router.submit(PROMPT, _sampling(8))
        assert first.result(30) == reference(PROMPT, 8)
        old = c.router.instances["md0"].address
        c.kill("md0")
        c.run_until(lambda: c.router.health.state("md0") is PeerState.DOWN, timeout_s=10)
        fresh = c.restart("md0")
        assert fresh.info.address != old and c.directory.peer("md0").address == fresh.info.address
        c.run_until(lambda: c.router.health.ready("md0") and "md0" not in c.router.joining, timeout_s=10)
        p_failed = c.worker("p0").counters["transfers_failed"]
        stream = c.router.submit([256, *b"a new prompt for a new md"], _sampling(8))
        assert stream.result(30) == reference([256, *b"a new prompt for a new md"], 8)
        assert c.worker("p0").counters["transfers_failed"] == p_failed  # P reached the new MD, not the dead one
        assert fresh.worker.counters["orders"] == 1
    finally:
        c.close()
