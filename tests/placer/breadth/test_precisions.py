"""Precisions: weight int8/int4 (weight-only), fp8, fp4 (NVFP4) and KV int8/fp8/fp4 — bytes and rates."""

from __future__ import annotations

import pytest

from placer.catalog import KV_DTYPES, WEIGHT_DTYPES, get_chip, get_model
from placer.errors import InfeasiblePlanError, InputError
from placer.optimize import optimize
from placer.perfmodel import InstanceModel
from placer.problem import resolve
from placer.specs import Scenario, parse_scenario
from placer.validate import validate


def _im(chip: str, weights: str, kv: str = "bf16", tp: int = 2) -> InstanceModel:
    return InstanceModel(get_chip(chip), tp, get_model("llama-3.1-70b"), weights, kv)


def _scenario(inventory: dict, weights: str = "fp4", kv: str = "fp8", **top) -> dict:
    return {"name": "precision", "model": "llama-3.1-70b", "weight_dtype": weights, "kv_dtype": kv,
            "datacenters": [{"name": "dc", "inventory": inventory}],
            "workload": {"arrival_rps": 2.0, "classes": [
                {"name": "c", "share": 1.0, "input_tokens": 8192, "output_tokens": 512, "hit_rate": 0.5}]},
            "sla": {"ttft_p90_s": 3.0, "tpot_s": 0.05}, "options": {"tp_degrees": [1, 2, 4, 8]}, **top}


def test_scenario_dtypes_are_the_catalogs():
    assert Scenario.model_fields["kv_dtype"].annotation.__args__ == KV_DTYPES
    assert Scenario.model_fields["weight_dtype"].annotation.__args__[0].__args__ == WEIGHT_DTYPES


def test_weight_bytes_shrink_and_weight_only_types_keep_the_bf16_rate():
    """int8/int4 halve and quarter the bytes a decode step streams (faster, memory bound) but
    their GEMMs run at the bf16 rate (prefill no faster); fp8 speeds both on Hopper."""
    ims = {w: _im("H100-SXM", w, tp=4) for w in ("bf16", "fp8", "int8", "int4")}
    assert ims["bf16"].weight_bytes > ims["int8"].weight_bytes > ims["int4"].weight_bytes
    assert ims["int4"].weight_bytes == pytest.approx(ims["bf16"].weight_bytes * (0.5 + 2 / 128) / 2)
    steps = {w: im.step_s(8, 4096) for w, im in ims.items()}
    assert steps["int4"] < steps["int8"] < steps["bf16"]
    assert ims["int8"].flops_per_s == ims["int4"].flops_per_s == ims["bf16"].flops_per_s < ims["fp8"].flops_per_s
    assert ims["fp8"].prefill_s(16384, 0.0) < ims["int4"].prefill_s(16384, 0.0)


def test_fp4_runs_at_the_fp4_rate_only_where_the_datasheet_has_one():
    b200 = _im("B200", "fp4")
    assert b200.unsupported is None
    assert b200.flops_per_s == 2 * get_chip("B200").flops_per_s("fp4") == 2 * _im("B200", "fp8").flops_per_s
    assert "no fp4 rate" in _im("H100-SXM", "fp4").unsupported
    assert "no fp4 rate" in _im("H100-SXM", "bf16", kv="fp4").unsupported


def test_kv_bytes_per_dtype():
    model = get_model("llama-3.1-70b")
    kv = {d: model.kv_bytes_per_token(d) for d in KV_DTYPES}
    assert kv["bf16"] == 2 * kv["fp8"]
    assert kv["fp8"] < kv["int8"] < 1.05 * kv["fp8"]  # + fp16 scale and zero per head
    assert kv["fp4"] == pytest.approx(kv["fp8"] * (0.5 + 1 / 16))
    mla = get_model("deepseek-v3")
    assert mla.kv_bytes_per_token("fp4") < mla.kv_bytes_per_token("fp8") < mla.kv_bytes_per_token("bf16")


def test_fp4_plans_only_chips_with_the_rate_and_passes_validate():
    scenario = parse_scenario(_scenario({"H100-SXM": 16, "B200": 16}, weights="fp4", kv="fp4"))
    problem = resolve(scenario)
    plan = optimize(problem)
    assert {p.chip for p in plan.pools} == {"B200"}
    assert any("H100-SXM: fp4 weights need fp4 tensor cores" in n for n in plan.notes)
    assert validate(problem, plan) == []
    with pytest.raises(InfeasiblePlanError, match="fp4"):
        optimize(parse_scenario(_scenario({"H100-SXM": 16}, weights="fp4")))


def test_int4_weight_only_plans_and_passes_validate():
    scenario = parse_scenario(_scenario({"H100-SXM": 16}, weights="int4", kv="int8"))
    problem = resolve(scenario)
    plan = optimize(problem)
    assert plan.metrics.goodput_rps > 0
    assert validate(problem, plan) == []


@pytest.mark.parametrize(("changes", "field"), [
    ({"weight_dtype": "int3"}, "weight_dtype"),
    ({"kv_dtype": "int4"}, "kv_dtype"),
    ({"chips": [{"name": "X", "base": "H100-SXM", "fp4_tflops": -1}]}, r"chips\.0\.fp4_tflops"),
])
def test_bad_precisions_are_rejected_with_named_errors(changes, field):
    with pytest.raises(InputError, match=field):
        parse_scenario({**_scenario({"H100-SXM": 8}), **changes})
