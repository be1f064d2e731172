"""The plan's TPOT over every token a request sees (placer.evaluate._metrics): RLD's relayed and filtered tokens too."""

from __future__ import annotations

import math

import pytest

from placer.optimize import evaluate_plan
from placer.plan import Plan
from placer.problem import resolve
from placer.sim import SimConfig
from placer.specs import parse_scenario
from tests.placer.sim_tpot import simulated_tpot


def _relaying(rps: float = 1.0):
    """PDD over a slow line: a long prompt's KV crawls to MD (RLD on an A100 decodes meanwhile), short turns go
    P → MD (H100), a few long prompts are filtered to RLD and finish there."""
    scenario = parse_scenario({
        "name": "relay", "model": "llama-3.1-8b", "kv_dtype": "bf16",
        "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 2, "A100-80G-SXM": 2}},
                        {"name": "dc-b", "inventory": {"H100-SXM": 2}}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10.0, "rtt_ms": 30}],
        "workload": {"arrival_rps": rps, "classes": [
            {"name": "long", "share": 0.4, "input_tokens": 6000, "output_tokens": 256, "hit_rate": 0.0},
            {"name": "turn", "share": 0.5, "input_tokens": 500, "output_tokens": 64, "hit_rate": 0.0},
            {"name": "odd", "share": 0.1, "input_tokens": 9000, "output_tokens": 128, "hit_rate": 0.0}]},
        "sla": {"ttft_p90_s": 10.0, "tpot_s": 0.5}, "options": {"tp_degrees": [1], "drc": False}})
    plan = Plan.model_validate({"scenario": "relay", "pools": [
        {"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1},
        {"role": "RLD", "datacenter": "dc-a", "chip": "A100-80G-SXM", "tp": 1, "count": 1},
        {"role": "MD", "datacenter": "dc-b", "chip": "H100-SXM", "tp": 1, "count": 1}],
        "routes": [{"request_class": "long", "pipeline": "P-RLD-MD", "src": "dc-a", "dst": "dc-b", "rps": 0.4 * rps},
                   {"request_class": "turn", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-b", "rps": 0.5 * rps},
                   {"request_class": "odd", "pipeline": "P-RLD", "src": "dc-a", "dst": "dc-a", "rps": 0.1 * rps}]})
    return scenario, plan


def _simulated(scenario, plan) -> tuple[float, float]:
    """The simulator's TPOT over tokens and RLD's token share."""
    tpot, data = simulated_tpot(scenario, plan, SimConfig(requests=3000, seed=3))
    return tpot, data["rld_token_share"]


def test_the_plan_s_tpot_counts_the_tokens_rld_streams_as_the_simulator_s_requests_see_them():
    # a relayed request's first tokens come from RLD's steps (an A100, slower than MD's H100) while its KV crawls,
    # and a filtered one decodes there to the end: the plan's TPOT is the mean over all of them, as the executor
    # and the simulator measure a request's (last − first token) ÷ (output − 1): 8.28 ms planned, 8.27 simulated
    # (RLD 31 % of the tokens). MD's steps alone read 6.95 ms, -16 % (pdd's bench: 8.8 ms where the simulator's
    # requests saw 10.1)
    scenario, plan = _relaying()
    metrics = evaluate_plan(resolve(scenario), plan).metrics
    tpot, rld_share = _simulated(scenario, plan)
    assert metrics.rld_token_share == pytest.approx(rld_share, abs=0.05)
    assert rld_share > 0.25  # RLD's pace weighs in the mean
    assert metrics.tpot_s == pytest.approx(tpot, rel=0.05)


class _ContextStep:
    """A decoder whose step grows with the batch's mean context (the bench's CPU table: 3.2 ms at 400 tokens, 11.8 at
    1,800 alone)."""

    batch_cap = 64
    kv_capacity_tokens = 1e9

    def step_s(self, batch: float, context_tokens: float) -> float:
        return batch * (0.001 + 6e-6 * context_tokens)


def test_a_short_relayed_prompt_beside_long_ones_streams_tokens_at_its_own_context_s_step():
    # pdd's bench RLD: filtered 1,557-token prompts and long relays set its mean step (12.5 ms); a 368-token relay
    # steps some 5 ms a token while its KV crawls 0.19 s — the simulator's RLD made 40 tokens, the pool's step 16
    from types import SimpleNamespace

    from placer.evaluate import DecodeState, _rld_tokens_per_s, _settle_batch
    from placer.pdd import RLD
    from placer.plan import PoolKey

    key = PoolKey(RLD, "dc-a", "cpu", 1)
    short, long = SimpleNamespace(input_tokens=368), SimpleNamespace(input_tokens=1683)
    rld = DecodeState(count=1, im=_ContextStep(), held=0.05 * 0.19 + 0.05 * 1.9,
                      held_context=0.05 * 0.19 * 368 + 0.05 * 1.9 * 1683)
    rld.tokens_per_s, rld.context_weighted = 0.4, 0.4 * 1560  # filtered: 0.1 req/s of 4 tokens
    _settle_batch(SimpleNamespace(tpot_s=1.0), key, rld, [])
    plan = SimpleNamespace(assignments=[])
    _rld_tokens_per_s(None, plan, {"new": short, "new-long": long}, {key: rld},
                      [(0.05, 0.19, 320, key, "new", "dc-b"), (0.05, 1.9, 320, key, "new-long", "dc-b")])
    pool_step = rld.seen_step_s
    short_step = rld.own_step_s(368 + 20)
    assert short_step < 0.5 * pool_step
    # the short relay's tokens at its own step, the long one's near the pool's: each relay's gaps at its own pace
    assert rld.relay_gaps_per_s == pytest.approx(0.05 * (math.ceil(0.19 / short_step) - 1)
                                                 + 0.05 * (math.ceil(1.9 / rld.own_step_s(1683 + 80)) - 1), rel=0.05)
    assert rld.relay_gaps_per_s > 0.05 * (math.ceil(0.19 / pool_step) - 1) + 0.05 * (math.ceil(1.9 / pool_step) - 1)
