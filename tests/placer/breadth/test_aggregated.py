"""Aggregated pools (role A) as a choice of the MILP, checked end to end: the choice itself,
the checkers, the simulator, the `agg` baseline and the new options' errors."""

from __future__ import annotations

import pytest

from placer.aggregated import agg_design
from placer.baselines import solve_baseline
from placer.errors import InputError
from placer.flows import instance
from placer.pdd import AGG, P
from placer.optimize import optimize
from placer.problem import resolve
from placer.sim import simulate
from placer.sim.config import SimConfig
from placer.specs import parse_scenario
from placer.validate import validate
from tests.placer.conftest import micro_dict


def _one_class(input_tokens: int, output_tokens: int, ttft_s: float, tpot_s: float, rps: float, **options) -> dict:
    return {"name": "one-class", "model": "llama-3.1-70b", "kv_dtype": "fp8", "weight_dtype": "fp8",
            "datacenters": [{"name": "dc", "inventory": {"H100-SXM": 32}}],
            "workload": {"arrival_rps": rps, "classes": [
                {"name": "c", "share": 1.0, "input_tokens": input_tokens, "output_tokens": output_tokens,
                 "hit_rate": 0.0}]},
            "sla": {"ttft_p90_s": ttft_s, "tpot_s": tpot_s},
            "options": {"tp_degrees": [1, 2, 4, 8], "aggregated": True, **options}}


def _roles(plan) -> set[str]:
    return {p.role for p in plan.pools if p.count > 0}


def test_short_prompts_loose_ttft_choose_aggregated():
    """1K-token prompts, 256 output tokens, TTFT 5 s, TPOT 50 ms, 5 req/s on Llama-3.1-70B fp8.

    First principles (figures from the model, placer estimate): a request's prefill is 1024
    tokens = two 512-token chunks, against 256 decode steps — the prefill is ~1 % of the
    request's steps. On two H100s a mixed step with a 512-token chunk takes ~36 ms (decode
    alone ~15 ms), inside the 50 ms TPOT with a batch of ~200, so the chunk's interference
    costs batch, not the SLA. Disaggregating instead needs at least one whole P instance
    (two more H100s holding a second copy of the 70 GB of weights) for 5 × ~0.04 s = 0.2
    s/s of prefill work — mostly idle — plus a KV copy per request; and the 5 s TTFT leaves
    room to wait for the aggregated prefill budget. So the BCR optimum is all aggregated."""
    scenario = parse_scenario(_one_class(1024, 256, ttft_s=5.0, tpot_s=0.05, rps=5.0))
    plan = optimize(scenario)
    assert _roles(plan) == {AGG}
    assert all(r.pipeline == "A" for r in plan.routes)
    assert validate(resolve(scenario), plan) == []


def test_long_prompts_tight_tpot_choose_disaggregated():
    """32K-token prompts, 512 output tokens, TPOT 25 ms on the same model and chips.

    First principles (figures from the model): a chunk's cost grows with its prefix — each of its
    tokens attends to up to 32K cached ones — on top of ~140 GFLOP of GEMMs per token, so only
    small chunks fit a 25 ms step: 128 tokens on two H100s, 256 on four, 512 on eight. A 32K
    prompt then holds the prefill budget for 64–256 steps (TTFT₀ 1.6–6 s) and the budget is
    5–20K tokens/s per instance, while the chunk in every step cuts the decode batch (e.g. 42
    instead of 69 on eight chips). A dedicated P instance prefills the same prompt in four
    8K-token forwards at full GEMM efficiency — 28K tokens/s on eight chips — with no TPOT to
    honour, and the decode pool keeps its whole batch; the KV copy over RDMA is tens of ms. So
    the BCR optimum is disaggregated (P + decode, no A)."""
    scenario = parse_scenario(_one_class(32768, 512, ttft_s=10.0, tpot_s=0.025, rps=1.0))
    plan = optimize(scenario)
    assert P in _roles(plan)
    assert AGG not in _roles(plan)
    assert validate(resolve(scenario), plan) == []


def _micro_light(aggregated: bool) -> dict:
    """The micro scenario at 2 req/s, where one A instance carries the load when allowed. (At its 6 req/s,
    P + MD pools win by < 1 % of BCR since decode pools reserve each request's final context —
    placer.kv_admission — while A allocates as tokens grow and preempts, the executor's A role.)"""
    return micro_dict(options={**micro_dict()["options"], "aggregated": aggregated},
                      workload={**micro_dict()["workload"], "arrival_rps": 2.0})


def test_aggregated_off_by_default_and_on_it_may_mix_with_pd(micro_problem):
    """Default plans never hold A pools (the examples' plans stay as they were); turned on, the
    micro scenario's plan at 2 req/s uses A and still passes validate()."""
    assert AGG not in _roles(optimize(micro_problem))
    assert AGG not in _roles(optimize(parse_scenario(_micro_light(aggregated=False))))
    scenario = parse_scenario(_micro_light(aggregated=True))
    plan = optimize(scenario)
    assert AGG in _roles(plan)
    assert validate(resolve(scenario), plan) == []


def test_chunk_interference_shrinks_the_design_batch():
    """A bigger chunk per step lengthens the mixed step, so fewer sequences meet the same TPOT."""
    problem = resolve(parse_scenario(_one_class(8192, 512, ttft_s=5.0, tpot_s=0.05, rps=1.0)))
    im = instance(problem, "H100-SXM", 2)
    small, big = agg_design(problem, im, 256), agg_design(problem, im, 4096)
    assert small.batch > big.batch >= 0
    assert small.step_s <= problem.tpot_s and (big.batch == 0 or big.step_s <= problem.tpot_s)


def test_agg_baseline_and_simulator_run_aggregated_plans():
    """`compare`'s agg baseline plans A pools only, passes validate(), and the simulator replays it
    with its TTFT within the SLA and TPOT within 25 % of the plan's."""
    scenario = parse_scenario(_one_class(1024, 256, ttft_s=5.0, tpot_s=0.05, rps=5.0, aggregated=False))
    problem = resolve(scenario)
    plan = solve_baseline(problem, "agg")
    assert _roles(plan) == {AGG}
    assert validate(problem, plan) == []
    sim = simulate(scenario, plan, SimConfig(requests=1500, seed=3)).data
    assert sim["requests"] > 0
    assert sim["ttft_p90_s"] <= problem.ttft_p90_s
    assert sim["tpot_p50_s"] == pytest.approx(plan.metrics.tpot_s, rel=0.25)


@pytest.mark.parametrize(("options", "field"), [
    ({"aggregated": "sometimes"}, "options.aggregated"),
    ({"agg_chunk_tokens": []}, "options.agg_chunk_tokens"),
    ({"agg_chunk_tokens": [8]}, "options.agg_chunk_tokens"),
    ({"agg_chunk_tokens": [100000]}, "options.agg_chunk_tokens"),
    ({"agg_chunk_tokens": ["big"]}, "options.agg_chunk_tokens"),
])
def test_new_options_rejected_with_named_errors(options, field):
    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        parse_scenario(_one_class(1024, 256, 5.0, 0.05, 1.0, **options))


def test_evaluate_routes_a_hand_written_aggregated_plan():
    """`placer evaluate` of pools only (A pools, aggregated off in the scenario) routes the load
    on them and the result passes validate()."""
    from placer.optimize import evaluate_plan

    scenario = parse_scenario(_one_class(1024, 256, ttft_s=5.0, tpot_s=0.05, rps=5.0, aggregated=False))
    problem = resolve(scenario)
    pools_only = solve_baseline(problem, "agg").model_copy(update={"routes": [], "assignments": []})
    plan = evaluate_plan(problem, pools_only)
    assert _roles(plan) == {AGG}
    assert plan.metrics.served_rps == pytest.approx(5.0, rel=1e-4)
    assert validate(problem, plan) == []


def _billed_usd_per_h(problem, plan) -> float:
    """What the three token prices bill in an hour for the tokens the plan serves."""
    classes = {c.name: c for c in problem.classes}
    new = cached = out = 0.0
    for r in plan.routes:
        c = classes[r.request_class]
        n = max(1.0, (1 - c.hit_rate) * c.input_tokens)
        new, cached, out = new + r.rps * n, cached + r.rps * (c.input_tokens - n), out + r.rps * c.output_tokens
    m = plan.metrics
    prices = [(m.usd_per_million_input_tokens, new), (m.usd_per_million_cached_input_tokens, cached),
              (m.usd_per_million_output_tokens, out)]
    return sum((p or 0.0) * tokens * 3600 / 1e6 for p, tokens in prices)


@pytest.mark.parametrize("aggregated", [True, False])
def test_token_prices_bill_the_whole_cost_on_aggregated_and_disaggregated_plans(aggregated):
    """Every pool's cost goes to some token kind (an A pool's split by its prefill share of step time)."""
    scenario = parse_scenario(_micro_light(aggregated))
    problem = resolve(scenario)
    plan = optimize(problem)
    assert (AGG in _roles(plan)) == aggregated
    assert _billed_usd_per_h(problem, plan) == pytest.approx(plan.metrics.cost_usd_per_h, rel=1e-6)
    assert plan.metrics.usd_per_million_input_tokens > 0 and plan.metrics.usd_per_million_output_tokens > 0
