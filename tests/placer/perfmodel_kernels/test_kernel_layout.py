"""How the composed forward lays an instance's ops out per rank (issue 41, part 2): which tables it asks,
with what layout, and that prefill reaches every caller through the roofline's own seam."""

from __future__ import annotations

from dataclasses import fields

import pytest

from placer.catalog import get_chip, get_model
from placer.perfmodel.constants import PREFILL_CHUNK_OVERHEAD_S
from placer.perfmodel.engines import _KERNEL_CLASSES
from placer.perfmodel.op_costs import OpCosts
from placer.shapes import Shape, shape_model


class Recording:
    """Tables that answer every op in 10 µs and record what they were asked."""

    version = "0"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str):
        def answer(*args):
            self.calls.append((name, args))
            return 1e-5
        return answer


def kernel_model(shape: Shape, model: str, weights: str = "fp8"):
    chip = get_chip("H200-SXM")
    base = shape_model(shape, chip, get_model(model), weights, "bf16")
    tables = Recording()
    ops = OpCosts(chip, tables, chip, "measured kernels (test 0, h200_sxm)")
    return _KERNEL_CLASSES[type(base)](**{f.name: getattr(base, f.name) for f in fields(base)}, ops=ops), tables


def test_dep_splits_experts_over_the_chips_and_tp_shards_each_expert():
    """DeepSeek-V3 on 8 chips: dep asks the grouped-expert table for ep 8 (tp 1); the MoE ``tp`` shape,
    as SGLang and vLLM launch ``--tp-size 8``, for every expert tensor parallel (tp 8, ep 1)."""
    dep, dep_tables = kernel_model(Shape(8, "dep"), "deepseek-v3")
    dep.step_s(64, 2000)
    tp, tp_tables = kernel_model(Shape(8), "deepseek-v3")
    tp.step_s(64, 2000)
    moe_dep = {args[-2:] for name, args in dep_tables.calls if name == "moe_s"}
    moe_tp = {args[-2:] for name, args in tp_tables.calls if name == "moe_s"}
    assert moe_dep == {(1, 8)} and moe_tp == {(8, 1)}
    # block-scaled FP8: the checkpoint ships DeepSeek's 128x128-scaled weights
    assert {args[0] for name, args in dep_tables.calls if name in ("gemm_s", "moe_s")} == {"fp8_block"}
    # dep: the experts' all-to-all from the tables; tp: an all-reduce per MoE layer and none
    assert any(name == "alltoall_s" for name, _ in dep_tables.calls)
    assert not any(name == "alltoall_s" for name, _ in tp_tables.calls)


def test_dense_tensor_parallel_gemms_are_per_rank_shapes_with_an_allreduce():
    km, tables = kernel_model(Shape(4), "llama-3.1-70b", "bf16")
    km.step_s(32, 1000)
    m = get_model("llama-3.1-70b")
    shapes = {(args[2], args[3]) for name, args in tables.calls if name == "gemm_s"}
    assert ((m.q_heads + 2 * m.kv_heads) * m.head_dim // 4, m.hidden) in shapes  # QKV split by heads
    assert (m.hidden, m.q_heads * m.head_dim // 4) in shapes  # O
    assert (m.vocab // 4, m.hidden) in shapes  # the LM head, sampled rows only
    assert {args[:2] for name, args in tables.calls if name == "allreduce_s"} == {("bf16", 4)}


def test_a_prefill_chunk_is_its_kernels_through_the_roofline_forward():
    """prefill_chunk_parts carries the measured seconds (as FLOP-equivalents), so the estimate's and the
    simulator's packing of short prompts (forward_s of k × the work) read the kernels too."""
    km, _ = kernel_model(Shape(1), "llama-3.1-8b", "bf16")
    kinds = km.prefill_kernels(2048, 0, 2048)
    work, _ = km.prefill_chunk_parts(2048, 0, 2048)
    assert work / km.flops_per_s == pytest.approx(kinds["linear"][0] + kinds["linear"][1] + kinds["attention"][0]
                                                  + kinds["attention"][1] + kinds["elementwise"][1])
    assert km.prefill_chunk_s(2048, 0, 2048) == pytest.approx(
        max(work / km.flops_per_s, (km.weight_bytes + 2048 * km.kv_bytes_per_token) / km.mem_bw_bytes_per_s)
        + PREFILL_CHUNK_OVERHEAD_S)
