"""The PDD report's effects, reproduced on small scenarios in the simulator."""

from __future__ import annotations

import pytest

from placer.baselines import solve_baseline
from placer.plan import Assignment, Route
from placer.sim import SimConfig, simulate
from placer.sim.sweep import run_sweep
from placer.specs import parse_scenario


def _rld_pool(result) -> dict:
    return next(p for p in result["pools"] if p["role"] == "RLD")


def test_naive_cross_dc_pd_has_a_long_ttft_tail_that_pdd_removes(small_problem, slack_plan, seed):
    naive = solve_baseline(small_problem, "cross-dc-pd")
    assert {r.pipeline for r in naive.routes} == {"P-D"} and all(r.src != r.dst for r in naive.routes)
    pd = simulate(small_problem, naive, SimConfig(requests=3_000, seed=seed))
    # every request ships its whole prompt's KV over a shared line: seconds for most, far more for some
    assert pd["ttft_p50_s"] > 1.0
    assert pd["ttft_p90_s"] > 2.0 * pd["ttft_p50_s"]
    assert pd["ttft_p99_s"] > 3.0 * pd["ttft_p50_s"]
    # the PDD plan made with ~10 % slack (0.9 s): the optimum at 1.0 s sits on the SLA, where the
    # simulation lands within a few per cent either side of it
    pdd = simulate(small_problem, slack_plan, SimConfig(requests=20_000, seed=seed))
    assert pdd["ttft_p90_s"] <= small_problem.ttft_p90_s
    assert pdd["ttft_p99_s"] < 0.1 * pd["ttft_p99_s"]
    assert pdd["goodput_rps"] > 10 * pd["goodput_rps"]  # while carrying far more traffic


def test_relay_decode_emits_only_a_few_per_cent_of_the_tokens(small_problem, small_plan, seed):
    assert any(r.pipeline == "P-RLD-MD" for r in small_plan.routes)
    result = simulate(small_problem, small_plan, SimConfig(requests=20_000, seed=seed))
    assert 0.005 < result["rld_token_share"] < 0.10
    md_tokens = sum(p["tokens"] for p in result["pools"] if p["role"] == "MD")
    rld_tokens = _rld_pool(result)["tokens"]
    assert md_tokens > 9 * rld_tokens
    assert result["handoffs"]["one-shot"] + result["handoffs"]["catch-up"] > 0


def _relay_only(plan):
    """The plan with every class sent P→RLD (RLD decodes everything) — what PDD forbids."""
    rps: dict[str, float] = {}
    for r in plan.routes:
        rps[r.request_class] = rps.get(r.request_class, 0.0) + r.rps
    prefill = [p for p in plan.pools if p.role == "P" and p.datacenter == "dc-a"]
    relay = next(p for p in plan.pools if p.role == "RLD")
    total = sum(p.count for p in prefill)
    routes = [Route(request_class=c, pipeline="P-RLD", src="dc-a", dst="dc-a", rps=v) for c, v in rps.items()]
    assignments = [Assignment(request_class=c, pipeline="P-RLD", role="P", datacenter="dc-a", chip=p.chip, tp=p.tp,
                              dst="dc-a", rps=v * p.count / total) for c, v in rps.items() for p in prefill]
    assignments += [Assignment(request_class=c, pipeline="P-RLD", role="RLD", datacenter="dc-a", chip=relay.chip,
                               tp=relay.tp, dst="dc-a", rps=v) for c, v in rps.items()]
    return plan.model_copy(update={"routes": routes, "assignments": assignments})


def _thirds(series: list[int]) -> tuple[float, float]:
    n = len(series) // 3
    return sum(series[:n]) / n, sum(series[-n:]) / n


def test_general_traffic_on_p_to_rld_only_overloads_relay_decode(small_problem, small_plan, seed):
    config = SimConfig(requests=8_000, seed=seed)
    bad = simulate(small_problem, _relay_only(small_plan), config)
    label = next(k for k in bad["series"]["queues"] if k.startswith("RLD"))
    first, last = _thirds(bad["series"]["queues"][label])
    assert last > 3 * first and last > 1_000  # the RLD queue keeps growing for the whole run
    assert _rld_pool(bad)["max_queue"] > 0.5 * config.requests
    assert bad["ttft_p90_s"] > 100 * small_problem.ttft_p90_s
    good = simulate(small_problem, small_plan, config)
    first, last = _thirds(good["series"]["queues"][label])
    assert last < 50 and _rld_pool(good)["max_queue"] < 0.02 * config.requests


def test_a_decode_side_cache_that_lags_prefill_pushes_load_back_to_relay_decode(small_problem, small_plan, seed):
    aligned = simulate(small_problem, small_plan, SimConfig(requests=10_000, seed=seed))
    lagging = simulate(small_problem, small_plan, SimConfig(requests=10_000, seed=seed, drc_lag=0.05))
    assert lagging["drc_hit_rate"] < aligned["drc_hit_rate"] - 0.04
    assert lagging["links"][0]["mean_gbit_per_s"] > aligned["links"][0]["mean_gbit_per_s"]
    assert lagging["rld_token_share"] > 2 * aligned["rld_token_share"]
    assert _rld_pool(lagging)["mean_batch"] > 1.5 * _rld_pool(aligned)["mean_batch"]
    # lagging: RLD overloads and the tail runs away; aligned: the plan stays at its SLA. Its simulated
    # P90 spreads 0.90-1.09 s over seeds 1-7 (SLA 1.0 s; two equal-cost plans that split dc-b's MD
    # differently alike), so "at" is within that spread, not below the SLA on every seed.
    assert lagging["ttft_p90_s"] > 100 * small_problem.ttft_p90_s
    assert aligned["ttft_p90_s"] < 1.15 * small_problem.ttft_p90_s


def test_real_caches_sessions_that_change_pipeline_leave_the_decode_side_behind(small_problem, small_plan, seed):
    stable = simulate(small_problem, small_plan,
                      SimConfig(requests=6_000, seed=seed, workload="agentic", class_persistence=1.0))
    fickle = simulate(small_problem, small_plan,
                      SimConfig(requests=6_000, seed=seed, workload="agentic", class_persistence=0.0))
    # the prefill side's store sees every turn: its hit follows the classes either way
    mean_hit = sum(c.share * c.hit_rate for c in small_problem.classes)
    for run in (stable, fickle):
        assert run["p_hit_rate"] == pytest.approx(mean_hit, abs=0.03)
    assert stable["drc_hit_rate"] > stable["p_hit_rate"] - 0.02
    assert fickle["drc_hit_rate"] < fickle["p_hit_rate"] - 0.1
    assert fickle["rld_token_share"] > 2 * stable["rld_token_share"]


def test_adaptive_handoff_switches_mode_by_pending_relay_tokens(small_problem, small_plan, seed):
    def run(**kw):
        return simulate(small_problem, small_plan, SimConfig(requests=5_000, seed=seed, **kw))

    everything_catches_up = run(catch_up_threshold_tokens=0)
    nothing_catches_up = run(catch_up_threshold_tokens=10**9)
    adaptive = run()
    # threshold 0: every handoff with a decoded token pending catches up; only one whose KV reached
    # MD before RLD decoded past t0 (nothing pending: t0 came with MD's KV) is a one-shot
    catch_up, one_shot = everything_catches_up["handoffs"]["catch-up"], everything_catches_up["handoffs"]["one-shot"]
    assert catch_up > 20 * one_shot and catch_up > 0
    assert nothing_catches_up["handoffs"]["catch-up"] == 0 < nothing_catches_up["handoffs"]["one-shot"]
    assert adaptive["handoffs"]["catch-up"] > 0 and adaptive["handoffs"]["one-shot"] > 0
    # catch-up keeps RLD decoding while MD catches up; one-shot frees RLD at once
    assert everything_catches_up["rld_token_share"] > nothing_catches_up["rld_token_share"]
    md_extends = sum(p["extends"] for p in nothing_catches_up["pools"] if p["role"] == "MD")
    assert md_extends > 0  # MD rebuilt the relayed tokens' KV by extend-decode


QWEN_ONE_CLASS = {
    "name": "tail-chunks", "model": "qwen3-235b-a22b", "kv_dtype": "fp8", "weight_dtype": "fp8",
    "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 512}}],
    "workload": {"arrival_rps": 100.0, "classes": [
        {"name": "all", "share": 1.0, "input_tokens": 16384, "output_tokens": 16, "hit_rate": 0.9}]},
    "sla": {"ttft_p90_s": 2.0, "tpot_s": 0.05},
    "options": {"tp_degrees": [8], "prefill_chunk_tokens": 4096},
}


def test_bcr_against_mean_hit_rate_dips_where_a_small_tail_chunk_starts(seed):
    """New tokens (1 − h)·16384 cross 2 and 1 chunks of 4096 at h = 0.5 and 0.75: just below
    those hits each prompt ends in a tiny tail chunk that still pays a whole weight read."""
    chunk, tokens = 4096, 16384
    hits = [0.40, 0.48, 0.49, 0.51, 0.60, 0.70, 0.74, 0.76, 0.80]
    rows = run_sweep(parse_scenario(QWEN_ONE_CLASS), "hit-mean", hits, requests=3_000, seed=seed, use_ray=False)
    assert all(r["status"] == "ok" for r in rows)
    bcr = [r["sim_bcr_requests_per_usd"] for r in rows]
    new = [(1 - h) * tokens for h in hits]
    per_token = [b * n for b, n in zip(bcr, new)]  # prefilled tokens per USD: flat but for tail chunks
    dips = [i for i in range(1, len(hits) - 1)
            if per_token[i] < min(per_token[i - 1], per_token[i + 1]) * 0.97]
    assert dips, per_token
    for i in dips:
        tail = new[i] % chunk
        assert 0 < tail < 0.1 * chunk, (hits[i], tail)  # every dip sits just past a chunk boundary
    # crossing a boundary costs far more BCR than the few extra tokens: the jump in BCR is
    # at least twice the relative change in new tokens per prompt
    for below, above in ((2, 3), (6, 7)):
        assert bcr[above] / bcr[below] - 1 > 2 * (new[below] / new[above] - 1)
