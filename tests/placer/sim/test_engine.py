"""The simulator's parts and its run as a whole: timing laws, caches, determinism, memory."""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from heapq import heappop
from types import SimpleNamespace

import pytest

from placer.errors import InputError
from placer.flows import instance
from placer.pdd import CATCH_UP, ONE_SHOT
from placer.perfmodel import PREFILL_CHUNK_OVERHEAD_S
from placer.sim import SimConfig, simulate
from placer.sim.decode import DecodeInstance
from placer.sim.drc import BlockCache
from placer.sim.handoff import plan_handoff
from placer.sim.links import WanLink
from placer.sim.metrics import QuantileSketch, TimeSeries
from placer.sim.prefill import PrefillInstance

CONTRACT_KEYS = {"requests", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "sla_attainment",
                 "goodput_rps", "bcr_requests_per_usd", "rld_token_share", "handoffs", "links", "pools"}


class _Loop:
    """The engine's event heap alone, recording what the parts report back."""

    def __init__(self):
        self.heap, self.seq = [], iter(range(10**9))
        self.landed, self.decoded, self.prefilled = {}, {}, {}

    def kv_landed(self, req, t):
        self.landed[req.rid] = t

    def decode_done(self, req, t, inst):
        self.decoded[req.rid] = t

    def prefill_done(self, req, t):
        self.prefilled[req.rid] = t

    def run(self):
        while self.heap:
            t, _, fn, arg = heappop(self.heap)
            fn(t, arg)


def _req(rid, **kw):
    return SimpleNamespace(rid=rid, flow=None, dec=None, t_first=None, **kw)


def test_concurrent_transfers_share_a_line_and_each_pays_the_round_trip():
    loop = _Loop()
    link = WanLink(loop, "a", "b", bytes_per_s=1e9, rtt_s=0.03, jitter_s=0.0, series=TimeSeries(10, 10, "sum"),
                   rng=random.Random(0))
    link.add(_req(1), 1e9, 0.0)
    loop.run()
    assert loop.landed[1] == pytest.approx(1.03)
    loop2 = _Loop()
    link2 = WanLink(loop2, "a", "b", 1e9, 0.03, 0.0, TimeSeries(10, 10, "sum"), random.Random(0))
    link2.add(_req(1), 1e9, 0.0)
    link2.add(_req(2), 1e9, 0.0)
    link2.add(_req(3), 0.5e9, 1.0)  # joins halfway: three-way sharing from then on
    loop2.run()
    # 1 s at half rate moves 0.5 GB each; then thirds: 0.5 GB more each takes 1.5 s
    assert loop2.landed[3] == pytest.approx(1.0 + 1.5 + 0.03)
    assert loop2.landed[1] == pytest.approx(2.5 + 0.03) and loop2.landed[2] == pytest.approx(2.5 + 0.03)
    assert link2.bytes_total == pytest.approx(2.5e9)


def test_decode_batch_runs_at_the_performance_models_step_time(small_problem):
    im = instance(small_problem, "H20", 1)
    loop = _Loop()
    inst = DecodeInstance(loop, im, "MD", None, TimeSeries(10, 10))
    ctx_in, out = 16384, 100
    a, b = _req(1, n_in=ctx_in, n_out=out), _req(2, n_in=ctx_in, n_out=out)
    inst.join(a, 0.0, out)
    inst.join(b, 0.0, out)
    loop.run()
    step2 = im.step_s(2, ctx_in + out // 2)
    assert b.t_first == 0.0  # it streams t0 (P's token, carried with the KV) as it admits the request
    assert loop.decoded[1] == pytest.approx(out * step2)
    # a third request joining later runs alone after the first two finish
    c = _req(3, n_in=ctx_in, n_out=out)
    inst.join(c, loop.decoded[1], out)
    loop.run()
    assert loop.decoded[3] - loop.decoded[1] == pytest.approx(out * im.step_s(1, ctx_in + out // 2))


def test_prefill_tail_chunk_pays_a_whole_weight_read(small_problem):
    im = instance(small_problem, "H100-SXM", 1)
    inst = PrefillInstance(_Loop(), im, None, TimeSeries(10, 10))
    chunk = im.prefill_chunk_tokens
    exact, just_over = inst.alone_s(16384, chunk), inst.alone_s(16384, chunk + 64)
    weight_read = im.weight_bytes / im.mem_bw_bytes_per_s
    assert just_over - exact > weight_read + PREFILL_CHUNK_OVERHEAD_S * 0.99
    assert just_over == pytest.approx(im.prefill_s(16384, 1 - (chunk + 64) / 16384), rel=1e-6)


def test_prefill_packs_short_prompts_into_one_forward(small_problem):
    im = instance(small_problem, "H100-SXM", 1)
    loop = _Loop()
    inst = PrefillInstance(loop, im, None, TimeSeries(10, 10))
    reqs = [_req(i, n_in=16384, new=500, left=500, pos=16384 - 500) for i in range(4)]
    for r in reqs:
        inst.enqueue(r, 0.0)  # the first starts alone at once; the other three queue
    loop.run()
    assert inst.forwards == 2
    alone = inst.alone_s(16384, 500)
    assert loop.prefilled[0] == pytest.approx(alone)
    assert loop.prefilled[1] == loop.prefilled[2] == loop.prefilled[3] < loop.prefilled[0] + 3 * alone


def test_radix_cache_matches_prefixes_and_evicts_leaves_first():
    cache = BlockCache(capacity_blocks=6)
    cache.insert((1, 2, 3, 4))
    assert cache.match_tokens((1, 2, 3, 4), 2048) == 2048
    assert cache.match_tokens((1, 2, 9), 1536) == 1024
    assert cache.match_tokens((1, 2, 3, 4), 1800) == 1800  # a partial last block counts its tokens only
    cache.insert((1, 2, 7, 8))  # shares the prefix 1, 2: six blocks in all
    cache.insert((5, 6))  # over capacity: the oldest leaves (4, then 3) go, never a prefix block
    assert cache.match_tokens((1, 2, 3, 4), 2048) == 1024
    assert cache.match_tokens((1, 2, 7, 8), 2048) == 2048
    assert cache.match_tokens((5, 6), 1024) == 1024


def test_quantile_sketch_is_within_its_relative_error(seed):
    rng = random.Random(seed)
    values = [rng.lognormvariate(0, 1.5) for _ in range(20_000)] + [0.0] * 100
    sketch = QuantileSketch()
    for v in values:
        sketch.add(v)
    values.sort()
    for q in (0.5, 0.9, 0.99):
        exact = values[math.ceil(q * len(values)) - 1]
        assert sketch.quantile(q) == pytest.approx(exact, rel=0.005)
    assert sketch.mean == pytest.approx(sum(values) / len(values))


def test_handoff_modes_trade_relay_time_for_a_gap():
    def extend(k):
        return 0.02 + 0.0001 * k

    one = plan_handoff(ONE_SHOT, 100, one_way_s=0.015, line_bytes_per_s=1e9, rld_step_s=0.02, extend_s=extend)
    catch = plan_handoff(CATCH_UP, 100, one_way_s=0.015, line_bytes_per_s=1e9, rld_step_s=0.02, extend_s=extend)
    assert one.gap_s == pytest.approx(0.015 + 100 * 15 / 1e9 + extend(100))
    # catch-up's final batch is small: its crossing and extend leave a smaller pause than one-shot's
    assert 0 < catch.gap_s < one.gap_s and catch.rounds > 1 and catch.takeover_s > one.takeover_s


def test_same_seed_same_result_and_another_seed_differs(small_problem, small_plan, seed):
    for workload in ("classes", "agentic"):
        config = SimConfig(requests=3_000, seed=seed, workload=workload)
        first = simulate(small_problem, small_plan, config).to_json()
        again = simulate(small_problem, small_plan, config).to_json()
        assert first == again
        other = simulate(small_problem, small_plan, SimConfig(requests=3_000, seed=seed + 1, workload=workload))
        assert other.to_json() != first


def test_result_follows_the_simulation_contract(small_problem, small_plan, seed):
    result = simulate(small_problem, small_plan, SimConfig(requests=2_000, seed=seed))
    data = json.loads(result.to_json())
    assert CONTRACT_KEYS <= set(data)
    assert data["requests"] == 2_000
    assert set(data["handoffs"]) >= {"one-shot", "catch-up"}
    assert {"src", "dst", "mean_gbit_per_s", "peak_gbit_per_s"} <= set(data["links"][0])
    assert {"role", "datacenter", "chip", "tp", "utilization"} <= set(data["pools"][0])
    assert 0 <= data["sla_attainment"] <= 1
    assert data["ttft_p50_s"] <= data["ttft_p90_s"] <= data["ttft_p99_s"]
    assert data["bcr_requests_per_usd"] == pytest.approx(data["goodput_rps"] * 3600 / data["cost_usd_per_h"],
                                                         rel=1e-4)
    by_key = {(p.role, p.datacenter, p.chip, p.tp): p.count for p in small_plan.pools}
    assert {(p["role"], p["datacenter"], p["chip"], p["tp"]): p["count"] for p in data["pools"]} == by_key


def test_memory_stays_flat_as_the_request_count_grows(small_problem, small_plan, seed):
    peaks = []
    for n in (3_000, 24_000):
        tracemalloc.start()
        simulate(small_problem, small_plan, SimConfig(requests=n, seed=seed))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.3 * peaks[0] + 1_000_000, peaks  # 8x the requests, about the same memory


def test_a_plan_given_as_routes_only_is_routed_over_its_pools(small_problem, small_plan, seed):
    bare = small_plan.model_copy(update={"assignments": []})
    result = simulate(small_problem, bare, SimConfig(requests=2_000, seed=seed))
    assert result["measured_requests"] > 0 and result["goodput_rps"] > 0


def test_bad_inputs_name_what_is_wrong(small_problem, small_plan):
    with pytest.raises(InputError, match="requests"):
        SimConfig(requests=0)
    with pytest.raises(InputError, match="dispatch"):
        SimConfig(dispatch="fastest")
    with pytest.raises(InputError, match="trace"):
        SimConfig(workload="trace")
    empty = small_plan.model_copy(update={"routes": [], "assignments": []})
    with pytest.raises(InputError, match="routes"):
        from placer.sim.engine import Simulation

        Simulation(small_problem, empty, SimConfig(requests=10))


def test_trace_replay_with_hash_ids_finds_repeated_prompts_in_both_caches(small_problem, small_plan, tmp_path):
    lines = []
    for i in range(400):
        prompt = list(range(1000 * (i % 10), 1000 * (i % 10) + 32))  # 10 prompts of 32 blocks, each repeated
        lines.append(json.dumps({"timestamp": 1000 * i, "input_length": 16384, "output_length": 64,
                                 "hash_ids": prompt}))
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    result = simulate(small_problem, small_plan, SimConfig(requests=1_000, workload="trace", trace=str(trace),
                                                           warmup_fraction=0.25))
    assert result["requests"] == 400 and result["measured_requests"] == 300
    assert result["p_hit_rate"] > 0.95  # after the first 10, every prompt was seen before
    assert result["drc_hit_rate"] > 0.9  # and its KV sits in an MD of each datacenter it went to


def test_a_first_block_every_request_shares_does_not_send_them_all_to_one_md(small_problem, small_plan, tmp_path):
    """A trace whose requests share their first block (a system prompt) and nothing else: the MD
    instance that cached that block first must not take every request (consistent hashing with
    bounded loads, placer.prefix.pick_by_prefix, as the executor's router picks)."""
    from collections import Counter

    from placer.sim.engine import Simulation

    picked: Counter = Counter()

    class Recording(Simulation):
        def _pick_by_cache(self, pool, ids, n_in):
            inst, hit = super()._pick_by_cache(pool, ids, n_in)
            picked[id(inst)] += 1
            return inst, hit

    # the first request alone, long before the rest: only its MD has block 0 when they come
    lines = [json.dumps({"timestamp": 0 if i == 0 else 60_000 + 150 * i, "input_length": 4096, "output_length": 64,
                         "hash_ids": [0, *range(100 * i + 1, 100 * i + 8)]}) for i in range(300)]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    # every MD pool at two instances at least: the trace's class may decode on a pool the plan gave one
    # (small-pdd's cold class on dc-a's single MD since the heavy/light P split); the rule picks among a pool's
    # instances
    plan = small_plan.model_copy(update={"pools": [p.model_copy(update={"count": max(p.count, 2)}) if p.role == "MD"
                                                   else p for p in small_plan.pools]})
    sim = Recording(small_problem, plan, SimConfig(requests=300, workload="trace", trace=str(trace)))
    sim.run()
    assert sum(picked.values()) >= 250
    # unbounded (the longest hit always wins), the first MD took 263 of 300; bounded, 170
    assert max(picked.values()) <= 0.75 * sum(picked.values())


@pytest.mark.parametrize("mode", [ONE_SHOT, CATCH_UP])
def test_rld_decodes_until_its_final_batch_leaves_and_md_takes_over_when_it_lands(small_problem, small_plan, seed,
                                                                                  mode):
    # The executor's RLD keeps decoding until it sends the final batch (one-shot: when MainReady
    # reaches it, one way after MD holds the KV); MD takes over when that batch lands. The simulator
    # must stop RLD then, not when MD got the KV, and count the tokens RLD made meanwhile.
    from placer.sim.engine import Simulation

    seen = {}

    class Recording(Simulation):
        def _hand_off(self, t, req):
            seen[req.rid] = {"start": t, "pending": req.rld.produced(req) if req.dec is req.rld else None}
            super()._hand_off(t, req)

        def _ev_rld_stop(self, t, req):
            seen[req.rid]["stop"] = t
            super()._ev_rld_stop(t, req)
            seen[req.rid]["rld_tokens"] = req.rld_tokens

        def _ev_md_takeover(self, t, req):
            seen[req.rid]["takeover"] = t
            super()._ev_md_takeover(t, req)

    config = SimConfig(requests=3_000, seed=seed, workload="agentic", handoff_mode=mode)
    Recording(small_problem, small_plan, config).run()
    done = [s for s in seen.values() if "rld_tokens" in s and s["pending"] is not None]
    assert len(done) > 20, "the run should hand requests off"
    for s in done:
        assert s["start"] < s["stop"] < s["takeover"]
        assert s["rld_tokens"] - 1 >= s["pending"]  # what RLD made before MD had the KV, and then some
    grew = sum(s["rld_tokens"] - 1 > s["pending"] for s in done)
    assert grew > len(done) // 2, "RLD decodes on while MainReady travels back (and, catching up, the rounds)"
