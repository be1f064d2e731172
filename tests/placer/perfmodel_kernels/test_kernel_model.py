"""The forward composed from an engine's measured kernels (issue 41, parts 2 and 4)."""

from __future__ import annotations

import pytest

from placer.catalog import get_chip, get_model
from placer.perfmodel.constants import DECODE_STEP_OVERHEAD_S
from placer.perfmodel.engines import KernelForward, engine_model, nearest_measured
from placer.shapes import Shape, shape_model

from .conftest import ATTN_S, BATCH, CONTEXT, GEMM_S, MODEL, roofline_model


def test_decode_step_is_the_sum_of_its_table_lookups(tiny_tables):
    """Llama-3.1-8B, tp 1, batch 8 at context 1000: 32 layers × (QKV + O + gate/up + down + attention),
    the LM head once, the elementwise kernels from the roofline, the step's fixed overhead."""
    base = roofline_model()
    km = engine_model(base, "vllm")
    layers = get_model(MODEL).layers
    per_layer = GEMM_S["qkv"] + GEMM_S["o"] + GEMM_S["gate_up"] + GEMM_S["down"] + ATTN_S
    expected = layers * per_layer + GEMM_S["lm_head"] + base.elementwise_s(BATCH) + DECODE_STEP_OVERHEAD_S
    assert km.step_s(BATCH, CONTEXT) == pytest.approx(expected, rel=1e-9)
    assert km.step_s(BATCH, CONTEXT) != pytest.approx(base.step_s(BATCH, CONTEXT), rel=1e-3)


def test_roofline_engine_is_the_roofline_model_itself(tiny_tables):
    base = roofline_model()
    assert engine_model(base, "roofline") is base
    assert engine_model(base) is base


def test_covered_chip_answers_from_measured_kernels(tiny_tables):
    km = engine_model(roofline_model(), "vllm")
    assert isinstance(km, KernelForward)
    source = km.source_of_step(BATCH, CONTEXT)
    assert source.startswith("measured kernels (vllm 0.24.0, h200_sxm): gemm, attention")
    assert "roofline: elementwise" in source


def test_outside_the_measured_range_each_op_falls_back_and_says_so(tiny_tables):
    km = engine_model(roofline_model(), "vllm")
    base = roofline_model()
    # batch 64 lies outside every table (measured at 8 and 16 only): the step is the roofline's, exactly
    assert km.source_of_step(64, CONTEXT) == "roofline"
    assert km.step_s(64, CONTEXT) == base.step_s(64, CONTEXT)
    # batch 12 lies inside the GEMM and attention tables, the LM head too: measured, interpolated
    assert km.source_of_step(12, CONTEXT).startswith("measured kernels")
    # a prompt's prefill shapes were never measured: the roofline's prefill, exactly
    assert km.prefill_s(2048, 0.0) == base.prefill_s(2048, 0.0)
    assert km.source_of_prefill(0, 2048) == "roofline"


def test_uncovered_chip_is_transferred_from_the_nearest_measured_chip(tiny_tables):
    """H20 (Hopper, no tables) takes H200's curves scaled by its own peaks; the source says so."""
    h20 = shape_model(Shape(1), get_chip("H20"), get_model(MODEL), "bf16", "bf16")
    km = engine_model(h20, "vllm")
    assert km.source_of_step(BATCH, CONTEXT).startswith("transferred from h200_sxm vllm 0.24.0: gemm, attention")
    # decode at batch 8 is memory bound: H200's seconds × its HBM / H20's (4.8 / 4.0 TB/s)
    h200 = engine_model(roofline_model(), "vllm")
    qkv_h200 = h200.ops.measured_s("gemm", ("bf16", 8.0, 6144, 4096), 2 * 8 * 6144 * 4096, 6144 * 4096 * 2, "bf16")
    qkv_h20 = km.ops.measured_s("gemm", ("bf16", 8.0, 6144, 4096), 2 * 8 * 6144 * 4096, 6144 * 4096 * 2, "bf16")
    assert qkv_h20 == pytest.approx(qkv_h200 * 4.8 / 4.0, rel=0.01)


def test_nearest_measured_prefers_the_same_architecture(tiny_tables):
    chip, system, _ = nearest_measured(get_chip("H800-SXM"), "vllm")
    assert (chip.name, system) == ("H200-SXM", "h200_sxm")


def test_an_engine_without_tables_stays_on_the_roofline(tiny_tables):
    base = roofline_model()
    assert engine_model(base, "trtllm") is base


def test_a_measured_latency_table_wins_over_the_kernels(tiny_tables):
    from placer.profiles.measured import MeasuredInstanceModel
    from placer.profiles.tables import MeasuredTable

    table = MeasuredTable.__new__(MeasuredTable)  # never consulted: engine_model returns the model as it is
    base = roofline_model()
    measured = MeasuredInstanceModel(base.chip, 1, base.model, "bf16", "bf16", table=table)
    assert engine_model(measured, "vllm") is measured
