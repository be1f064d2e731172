"""Pipeline-parallel instance shapes (options.pipeline_parallel): tp 8 per node × pp nodes."""

from __future__ import annotations

import pytest

from placer.catalog import get_chip
from placer.errors import InputError
from placer.flows import instance
from placer.optimize import optimize
from placer.perfmodel import InstanceModel, pipeline_stages
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.validate import validate

#: A dense 405B model (Llama-3.1-405B's public config): 810 GB of bf16 weights, more than the
#: ~618 GB usable on one node of eight 80 GB H100s.
BIG = {"name": "dense-405b", "attn": "gqa", "layers": 126, "hidden": 16384, "q_heads": 128, "kv_heads": 8,
       "head_dim": 128, "params_total_b": 405.0, "params_active_b": 405.0}


def _scenario(**options) -> dict:
    return {"name": "big", "model": BIG, "kv_dtype": "bf16", "weight_dtype": "bf16",
            "datacenters": [{"name": "dc", "inventory": {"H100-SXM": 64}}],
            "workload": {"arrival_rps": 1.0, "classes": [
                {"name": "c", "share": 1.0, "input_tokens": 4096, "output_tokens": 256, "hit_rate": 0.5}]},
            "sla": {"ttft_p90_s": 5.0, "tpot_s": 0.1},
            "options": {"tp_degrees": [8, 16, 32], "pipeline_parallel": True, **options}}


def test_a_model_larger_than_a_node_gets_a_pp_shape_and_passes_validate():
    problem = resolve(parse_scenario(_scenario()))
    assert not instance(problem, "H100-SXM", 8).fits(1)
    plan = optimize(problem)
    assert plan.pools and all(p.tp >= 16 and p.pp == p.tp // 8 for p in plan.pools)
    assert '"pp": 2' in plan.to_json() or '"pp": 4' in plan.to_json()
    assert validate(problem, plan) == []


def test_pipeline_off_keeps_one_stage_and_moe_never_pipelines():
    problem = resolve(parse_scenario(_scenario(pipeline_parallel=False)))
    assert instance(problem, "H100-SXM", 16).pp == 1
    moe = resolve(parse_scenario({**_scenario(), "model": "deepseek-v3"}))
    assert instance(moe, "H100-SXM", 16).pp == 1
    assert pipeline_stages(problem.model, 12, True) == 1  # not whole nodes


def test_the_bubble_is_paid_once_per_prompt_and_matters_less_for_long_prompts():
    """A prompt's chunks follow each other through the stages; the last one still crosses pp − 1
    stages (and hops) after the first stage is done: short prompts pay that fill in full."""
    model = resolve(parse_scenario(_scenario())).model
    pp2 = InstanceModel(get_chip("H100-SXM"), 16, model, "bf16", "bf16", pp=2)
    assert pp2.stage_tp == 8
    for tokens in (2048, 65536):
        assert pp2.prefill_s(tokens, 0.0) > sum(
            pp2.prefill_chunk_s(tokens, s, min(8192, tokens - s)) for s in range(0, tokens, 8192))
    short_fill = pp2.prefill_s(2048, 0.0) / pp2.prefill_chunk_s(2048, 0, 2048)
    long_chunks = sum(pp2.prefill_chunk_s(65536, s, 8192) for s in range(0, 65536, 8192))
    assert short_fill > 1.9 and pp2.prefill_s(65536, 0.0) / long_chunks < 1.2


def test_decode_through_a_pipeline_reads_the_weights_once_per_micro_batch():
    """At a small batch a decode step is weight-read bound; with pp micro-batches each stage reads
    its weights once per micro-batch, so a token's step is about pp weight reads — slower than the
    same chips tensor parallel over NVLink would be (an upper bound here: 16 chips in one domain)."""
    model = resolve(parse_scenario(_scenario())).model
    chip = get_chip("H100-SXM")
    pp2 = InstanceModel(chip, 16, model, "bf16", "bf16", pp=2)
    one_domain = InstanceModel(chip.with_changes(nic_gbit=chip.scaleup_gbps_bidir * 4), 16, model, "bf16", "bf16")
    assert pp2.step_s(2, 4096) > 1.5 * one_domain.step_s(2, 4096)


def test_pipeline_parallel_option_is_named_when_invalid():
    with pytest.raises(InputError, match=r"options\.pipeline_parallel"):
        parse_scenario(_scenario(pipeline_parallel="maybe"))


def test_the_simulator_replays_a_pipeline_plan_near_its_prediction():
    """The simulated P instance lets the last chunk cross the other stages after the first is free,
    so its TTFT is at most the plan's (which charges the bubble as busy time) and close to it."""
    from placer.sim import SimConfig, simulate

    problem = resolve(parse_scenario(_scenario()))
    plan = optimize(problem)
    sim = simulate(problem, plan, SimConfig(requests=1500, seed=5))
    assert sim["requests"] > 0
    assert sim["ttft_p50_s"] == pytest.approx(plan.metrics.ttft_p50_s, rel=0.25)
    assert sim["tpot_p50_s"] == pytest.approx(plan.metrics.tpot_s, rel=0.25)
