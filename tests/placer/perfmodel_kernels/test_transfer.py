"""Carrying a measured kernel to a chip the database does not cover (issue 41, part 4): the measured
efficiency holds on the resource that bound the kernel where it was measured."""

from __future__ import annotations

import pytest

from placer.catalog import get_chip
from placer.perfmodel.op_costs import transfer_s

H200, H20 = get_chip("H200-SXM"), get_chip("H20")


def test_a_shape_bound_by_the_same_resource_on_both_chips_scales_by_that_resource():
    # batch-8 decode GEMM: memory bound on both (2 FLOP per byte)
    flops, nbytes = 2 * 8 * 6144 * 4096, 6144 * 4096 * 2
    assert transfer_s(2e-5, H200, H20, flops, nbytes, "bf16") == pytest.approx(2e-5 * 4.8 / 4.0)
    # a large prefill GEMM at the catalog's compute efficiency or better: compute bound on both
    flops, nbytes = 2 * 8192 * 8192 * 8192, 3 * 8192 * 8192 * 2
    fast = flops / 989e12 / 0.9
    assert transfer_s(fast, H200, H20, flops, nbytes, "bf16") == pytest.approx(fast * 989 / 148)


def test_a_slow_compute_bound_kernel_scales_only_its_tensor_share_by_the_tensor_peak():
    """Block-FP8 grouped GEMMs at ~20 % of H200's peak: the tensor cores' share (the FLOPs at the
    catalog's efficiency) scales by 1979 / 296, the rest — off the tensor cores — by HBM 4.8 / 4.0."""
    flops, nbytes = 7e11, 1.4e9
    measured = 5 * flops / 1979e12
    tensor = flops / 1979e12 / H200.compute_efficiency
    own = transfer_s(measured, H200, H20, flops, nbytes, "fp8")
    assert own == pytest.approx(tensor * 1979 / 296 + (measured - tensor) * 4.8 / 4.0)
    assert own < measured * 1979 / 296


def test_a_kernel_memory_bound_on_h200_is_not_charged_the_compute_gap_on_h20():
    """100 FLOP per byte: under H200's ridge (206 bf16), over H20's (37). Measured at 3x H200's HBM
    time, it keeps that HBM efficiency on H20 and runs its FLOPs at H20's own compute efficiency —
    not 3x H20's compute roofline, which would charge a latency-bound kernel as if FLOP bound."""
    nbytes = 1e8
    flops = 100 * nbytes
    measured = 3 * nbytes / 4.8e12
    own = transfer_s(measured, H200, H20, flops, nbytes, "bf16")
    compute_h20 = flops / 148e12
    assert own == pytest.approx(max(compute_h20 / H20.compute_efficiency, 3 * nbytes / 4.0e12))
    assert own < 3 * compute_h20  # the efficiency-ratio transfer's answer


def test_a_transferred_decode_attention_carries_the_one_query_call_the_table_timed():
    """A decode attention row times one query per sequence; with speculative positions the caller
    scales after. The transfer must see that call's FLOPs and bytes — not the speculative step's,
    which would make MLA decode look compute bound on H200 and charge H20's compute gap twice."""
    from dataclasses import fields

    from placer.catalog import get_model
    from placer.perfmodel.engines import _KERNEL_CLASSES
    from placer.perfmodel.op_costs import OpCosts
    from placer.shapes import Shape, shape_model
    from tests.placer.perfmodel_kernels.test_kernel_layout import Recording

    asked = {}
    for accept in (1.0, 1.85):
        base = shape_model(Shape(16, "dep"), H20, get_model("deepseek-v3"), "fp8", "bf16", mtp_accept=accept)
        ops = OpCosts(H20, Recording(), H200, "transferred from h200_sxm test 0")
        seen = []
        measured_s = ops.measured_s
        ops.measured_s = lambda family, args, *rest, _m=measured_s, _seen=seen: (
            _seen.append(rest) if family == "generation_mla" else None) or _m(family, args, *rest)
        im = _KERNEL_CLASSES[type(base)](**{f.name: getattr(base, f.name) for f in fields(base)}, ops=ops)
        im.step_s(768, 4864)
        asked[accept] = seen[0][:2]  # (FLOPs, bytes)
    assert asked[1.85] == pytest.approx(asked[1.0])
