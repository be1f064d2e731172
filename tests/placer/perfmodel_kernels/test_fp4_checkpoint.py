"""MLA's GEMMs as the engines run them (issue 41): an NVFP4 checkpoint's latent projections stay bf16,
as NVIDIA's NVFP4 DeepSeek checkpoints leave them (the bf16 table answers them), and the query and
latent down-projections are one fused GEMM."""

from __future__ import annotations

from dataclasses import fields

from placer.catalog import get_chip, get_model
from placer.perfmodel.engines import _KERNEL_CLASSES
from placer.perfmodel.layer_gemms import MLA_Q_LORA_RANK
from placer.perfmodel.op_costs import OpCosts
from placer.shapes import Shape, shape_model
from tests.placer.perfmodel_kernels.test_kernel_layout import Recording


def _fp4_model(model: str, shape: Shape):
    chip = get_chip("B200")
    base = shape_model(shape, chip, get_model(model), "fp4", "fp8")
    tables = Recording()
    ops = OpCosts(chip, tables, chip, "measured kernels (test 0, b200_sxm)")
    return _KERNEL_CLASSES[type(base)](**{f.name: getattr(base, f.name) for f in fields(base)}, ops=ops), tables


def test_mla_latent_projections_of_an_fp4_checkpoint_read_the_bf16_table():
    im, tables = _fp4_model("deepseek-v3", Shape(4, "dep"))
    im.step_s(256, 5000)
    m = get_model("deepseek-v3")
    dtypes = {(args[2], args[3]): args[0] for name, args in tables.calls if name == "gemm_s"}
    assert dtypes[(MLA_Q_LORA_RANK + m.kv_lora_rank + m.rope_dim, m.hidden)] == "bf16"  # q_a and kv_a, fused
    assert dtypes[(m.q_heads * (m.head_dim + m.rope_dim), MLA_Q_LORA_RANK)] == "bf16"  # q_b
    assert dtypes[(m.hidden, m.q_heads * m.head_dim)] == "fp4"  # O: quantized in the -v2 checkpoints
    assert {args[0] for name, args in tables.calls if name == "moe_s"} == {"fp4"}


def test_a_gqa_fp4_checkpoint_runs_every_gemm_in_fp4():
    im, tables = _fp4_model("llama-3.1-70b", Shape(1))
    im.step_s(64, 2000)
    assert {args[0] for name, args in tables.calls if name == "gemm_s"} == {"fp4"}


def test_mla_query_and_latent_down_projections_are_one_fused_gemm():
    """The engines run q_a and kv_a as one GEMM (TensorRT-LLM's Fuse_A_GEMM, SGLang's and vLLM's
    fused_qkv_a_proj): one launch over n = 1536 + 512 + 64, not two smaller ones."""
    im, tables = _fp4_model("deepseek-v3", Shape(4, "dep"))
    im.step_s(64, 2000)
    m = get_model("deepseek-v3")
    shapes = {(args[2], args[3]) for name, args in tables.calls if name == "gemm_s"}
    assert (MLA_Q_LORA_RANK + m.kv_lora_rank + m.rope_dim, m.hidden) in shapes
    assert (MLA_Q_LORA_RANK, m.hidden) not in shapes and (m.kv_lora_rank + m.rope_dim, m.hidden) not in shapes
