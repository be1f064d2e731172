"""The PDD protocol on the in-process fake channel: every pipeline and handoff gives the reference output.

Workers are pumped on the test's thread (no threads, no sleeps), so interleavings are
chosen by the test: e.g. RLD decodes k tokens before MD is allowed to import.
"""

from __future__ import annotations

import pytest

from executor.cluster import LocalCluster
from executor.engine import Engine, SamplingParams
from executor.handoff import HandoffPolicy
from executor.placement import InstanceSpec
from executor.request_log import BatchingRequestLog, MemorySink
from executor.routing import Pipeline, RoutingPolicy
from executor.transport.messages import HandoffTokens, KVData, KVPull, MainOrder, decode
from placer.pdd import CatchUpRule, FilterRule
from tests.executor.support import only, serving

SPECS = [InstanceSpec("p0", "P", "dc-a", "A"), InstanceSpec("rld0", "RLD", "dc-a", "A"),
         InstanceSpec("md0", "MD", "dc-b", "B")]
PROMPT = [256, *b"the quick brown fox jumps over the lazy dog"]
MAX_NEW = 40


def _sampling(n: int = MAX_NEW) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, stop_at_eos=False)


@pytest.fixture
def reference(model_config, engine_config):
    engine = Engine.from_seed(model_config, engine_config, seed=0, device="cpu")
    return lambda prompt, n=MAX_NEW: engine.generate(prompt, n, _sampling(n))


@pytest.fixture
def cluster(model_config, engine_config):
    made = []

    def make(policy: RoutingPolicy, handoff: HandoffPolicy | None = None, specs=SPECS) -> LocalCluster:
        config = serving(routing=policy, handoff=handoff or HandoffPolicy())
        c = LocalCluster(specs, model_config, engine_config, config, transport="fake", threads=False)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def serve(c: LocalCluster, prompt=PROMPT, n=MAX_NEW):
    stream = c.router.submit(prompt, _sampling(n))
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    return stream


def relay_first(c: LocalCluster, prompt=PROMPT, n=MAX_NEW, relay_steps=0):
    """Submit, let P prefill and RLD decode `relay_steps` times before MD may import, then finish."""
    stream = c.router.submit(prompt, _sampling(n))
    rld, md, p = c.worker("rld0"), c.worker("md0"), c.worker("p0")
    md.run_once()  # MD matches its cache and pulls
    rld.run_once()  # RLD pulls
    p.run_once()  # P takes the order and the pulls
    p.run_once()  # ... prefills and serves both pulls
    for _ in range(relay_steps):
        rld.run_once()
    c.run_until(lambda: stream.closed.is_set(), timeout_s=30)
    return stream


def messages_to(c: LocalCluster, dst: str, kind: type) -> list:
    return [t for t in c.network.sent if t.dst == dst and isinstance(t.message, kind)]


@pytest.mark.parametrize("pipeline", [Pipeline.P_MD, Pipeline.P_RLD, Pipeline.P_RLD_MD])
def test_each_pipeline_gives_the_single_engine_output(cluster, reference, pipeline):
    c = cluster(only(pipeline))
    stream = serve(c)
    assert stream.pipeline is pipeline
    assert stream.result() == reference(PROMPT)
    assert stream.record.extra["duplicates"] == 0 and stream.record.extra["conflicts"] == 0


@pytest.mark.parametrize("mode", ["one-shot", "catch-up"])
def test_handoff_after_eager_relay_tokens_gives_the_reference(cluster, reference, mode):
    c = cluster(only(Pipeline.P_RLD_MD), HandoffPolicy(mode=mode, catch_up=CatchUpRule(2)))
    stream = relay_first(c, relay_steps=12)
    assert stream.result() == reference(PROMPT)
    extra = stream.record.extra
    assert extra["handoff_mode"] == mode
    assert 12 <= extra["relay_tokens"] < MAX_NEW  # RLD streamed the eager tokens, MD the rest
    assert extra["duplicates"] == 0
    if mode == "catch-up":
        assert extra["handoff_rounds"] >= 2
    batches = [decode_msg(t) for t in messages_to(c, "md0", HandoffTokens)]
    assert [b.final for b in batches] == [False] * (len(batches) - 1) + [True]
    assert all(isinstance(t, int) for b in batches for t in b.tokens)  # token ids, never KV


def decode_msg(transfer):
    return transfer.message


@pytest.mark.parametrize("max_rounds", [3, 5])
def test_the_serving_configs_catch_up_rule_reaches_the_relay(cluster, reference, max_rounds):
    # The router's RelayOrder carries the config's CatchUpRule: RLD stops at the rule's round cap
    # (a final batch threshold of 0 never ends it earlier while RLD keeps producing; pdd's default
    # rule, 8 tokens, would end this handoff at its second batch).
    c = cluster(only(Pipeline.P_RLD_MD), HandoffPolicy(mode="catch-up", catch_up=CatchUpRule(0, max_rounds)))
    stream = relay_first(c, relay_steps=12)
    assert stream.result() == reference(PROMPT)
    batches = [decode_msg(t) for t in messages_to(c, "md0", HandoffTokens)]
    assert len(batches) == max_rounds and batches[-1].final


def test_adaptive_handoff_switches_on_the_plan_threshold(cluster, reference):
    c = cluster(only(Pipeline.P_RLD_MD), HandoffPolicy(mode="adaptive", catch_up_threshold_tokens=6))
    few = relay_first(c, relay_steps=2)
    many = relay_first(c, prompt=[256, *b"a different prompt entirely, long"], relay_steps=15)
    assert few.record.extra["handoff_mode"] == "one-shot"
    assert many.record.extra["handoff_mode"] == "catch-up"
    assert few.result() == reference(PROMPT)
    assert many.result() == reference([256, *b"a different prompt entirely, long"])


def test_token_id_handoff_is_far_smaller_than_the_kv_it_replaces(cluster):
    c = cluster(only(Pipeline.P_RLD_MD), HandoffPolicy(mode="one-shot"))
    stream = relay_first(c, relay_steps=20)
    extra = stream.record.extra
    assert extra["handoff_tokens"] >= 20
    assert extra["handoff_kv_bytes_replaced"] > 2 * extra["handoff_msg_bytes"]


def test_md_ready_before_the_relay_has_kv_hands_the_whole_stream_to_md(cluster, reference):
    c = cluster(only(Pipeline.P_RLD_MD))
    stream = c.router.submit(PROMPT, _sampling())
    md, p = c.worker("md0"), c.worker("p0")
    md.run_once()
    p.run_once()
    p.run_once()  # P prefilled; serves MD's pull (RLD has not even pulled yet)
    md.run_once()  # MD imports, says MainReady
    c.run_until(lambda: stream.closed.is_set())
    assert stream.result() == reference(PROMPT)
    assert stream.record.extra["relay_tokens"] == 0  # MD streamed everything, t0 included


def test_relay_finishing_first_releases_md_and_keeps_its_cache_warm(cluster, reference):
    c = cluster(only(Pipeline.P_RLD_MD))
    stream = relay_first(c, n=6, relay_steps=10)  # RLD reaches the budget before MD imports
    assert stream.result() == reference(PROMPT, 6)
    c.settle()
    md = c.worker("md0")
    assert md.mains == {}
    assert md.engine.cached_prefix_len(PROMPT) >= len(PROMPT) - 4  # imported anyway (DRC stays aligned)


def test_filtered_requests_never_cross_the_wan(cluster, reference):
    policy = RoutingPolicy(filter_rule=FilterRule(16, 0.5, 100))
    c = cluster(policy)
    stream = serve(c, n=12)
    assert stream.pipeline is Pipeline.P_RLD
    assert stream.result() == reference(PROMPT, 12)
    assert [t for t in c.network.sent if t.dst == "md0" or t.src == "md0"] == []


def test_drc_second_turn_pulls_only_what_md_lacks(cluster, reference):
    c = cluster(only(Pipeline.P_MD))
    first = serve(c)
    turn2 = PROMPT + first.result() + list(b" and then?")
    second = serve(c, prompt=turn2)
    assert second.result() == reference(turn2)
    pulls = [t.message for t in messages_to(c, "p0", KVPull)]
    assert pulls[0].start == 0
    assert pulls[1].start >= len(PROMPT) + MAX_NEW - 4  # MD's cache holds prompt AND outputs of turn 1
    kv = [t for t in messages_to(c, "md0", KVData)]
    assert kv[1].bytes_total < kv[0].bytes_total / 3
    assert second.record.prefix_hit_tokens >= len(PROMPT) - 4  # P's own hit on the prompt of turn 1


def test_router_predicts_hits_and_routes_high_hit_direct_low_hit_via_relay(cluster):
    c = cluster(RoutingPolicy(direct_min_hit_rate=0.8, filter_rule=FilterRule(min_input_tokens=10**6)))
    cold = serve(c)
    warm = serve(c, prompt=PROMPT + list(b"!"))
    assert cold.pipeline is Pipeline.P_RLD_MD
    assert warm.pipeline is Pipeline.P_MD
    assert warm.record.extra["est_hit_tokens"] == warm.record.prefix_hit_tokens > 0


def test_p_releases_staged_kv_when_every_consumer_is_done(cluster):
    c = cluster(only(Pipeline.P_RLD_MD))
    serve(c)
    c.settle()
    p = c.worker("p0")
    assert p.staged == {}
    assert p.counters["released"] == 1
    assert p.engine.blocks.pool.num_used == p.engine.blocks.radix.num_blocks  # only the cache is left


def test_staged_kv_is_freed_when_its_lease_expires(cluster):
    c = cluster(only(Pipeline.P_MD))
    c.network.drop("md0")  # MD never gets its order: nobody will pull
    c.router.submit(PROMPT, _sampling())
    p = c.worker("p0")
    p.run_once()
    p.run_once()
    assert list(p.staged) != []
    for s in p.staged.values():
        s.lease_until = 0.0  # the lease ran out
    p.run_once()
    assert p.staged == {} and p.counters["leases_expired"] == 1


def test_concurrent_requests_are_batched_and_each_matches_the_reference(cluster, reference):
    c = cluster(RoutingPolicy(direct_min_hit_rate=0.5, filter_rule=FilterRule(min_input_tokens=10**6)))
    prompts = [PROMPT, [256, *b"jumps over the lazy"], [256, *b"pack my box with five dozen liquor jugs"]]
    streams = [c.router.submit(p, _sampling()) for p in prompts]
    c.run_until(lambda: all(s.closed.is_set() for s in streams))
    assert [s.result() for s in streams] == [reference(p) for p in prompts]


def test_a_failing_request_ends_in_an_error_event_not_a_hang(cluster, model_config):
    c = cluster(only(Pipeline.P_MD))
    stream = c.router.submit([999], _sampling())  # outside the vocabulary: P's prefill fails
    c.run_until(lambda: stream.closed.is_set())
    with pytest.raises(RuntimeError, match="prefill failed"):
        stream.result()
    assert stream.record.finish_reason == "error"
    c.settle()
    md = c.worker("md0")
    assert md.mains == {} and md.counters["cancelled"] == 1  # the router told MD to drop it


def test_every_served_request_reaches_the_request_log_in_batches(model_config, engine_config):
    sink = MemorySink()
    log = BatchingRequestLog(sink, batch_size=2, flush_interval_s=60)
    routing = RoutingPolicy(filter_rule=FilterRule(min_input_tokens=10**6))
    with LocalCluster(SPECS, model_config, engine_config, serving(routing=routing),
                      transport="fake", threads=False, request_log=log) as c:
        for k in range(3):
            serve(c, prompt=PROMPT + [k], n=4)
    records = sink.records
    assert len(records) == 3 and len(sink.batches) == 2  # one full batch of 2, the rest at close
    r = records[0]
    assert (r.input_tokens, r.output_tokens, r.pipeline) == (len(PROMPT) + 1, 4, "P-RLD-MD")
    assert r.ttft_s is not None and r.ttft_s > 0 and r.tpot_s is not None


def test_orders_carry_named_fields_that_survive_the_wire():
    msg = MainOrder("r1", [1, 2, 3], {"max_new_tokens": 4}, "p0", None, "router")
    from executor.transport.messages import encode

    assert decode(encode(msg)) == msg


def test_md_waits_for_an_in_flight_prefix_instead_of_pulling_it_twice(cluster, reference):
    c = cluster(only(Pipeline.P_MD))
    turn2 = PROMPT + list(b" and the next turn")
    first = c.router.submit(PROMPT, _sampling())
    md = c.worker("md0")
    md.run_once()  # MD pulls turn 1 from 0; its KV is not here yet
    second = c.router.submit(turn2, _sampling())
    md.run_once()  # turn 2 shares turn 1's prompt: MD waits for that import
    assert md.counters["pulls_deferred"] == 1
    c.run_until(lambda: first.closed.is_set() and second.closed.is_set())
    pulls = [t.message for t in messages_to(c, "p0", KVPull)]
    assert [p.start for p in pulls] == [0, len(PROMPT) - len(PROMPT) % 4]  # the rest only
    assert first.result() == reference(PROMPT) and second.result() == reference(turn2)


def test_a_prompt_md_fully_caches_crosses_as_an_empty_payload(cluster, reference):
    c = cluster(only(Pipeline.P_MD))
    assert len(PROMPT) % 4 == 0  # whole blocks: MD can hold all of it
    serve(c)
    again = serve(c)
    assert again.result() == reference(PROMPT)
    kv = [t.message for t in messages_to(c, "md0", KVData)]
    assert (kv[1].start, kv[1].end) == (len(PROMPT), len(PROMPT))
