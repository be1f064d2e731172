"""The profiler's Triton copy kernels (interpreter on the CPU) and the roofline table."""

from __future__ import annotations

import pytest
import torch

from placer.catalog import get_chip
from profiler.rooflines import chip_for_device_name, for_cpu, from_chip


@pytest.mark.parametrize("n", [1, 1000, 4097])
def test_triton_copy_and_triad_match_torch(n):
    from profiler import triton_copy

    b, c, a = torch.rand(n), torch.rand(n), torch.empty(n)
    triton_copy.copy(b, a, block=1024, num_warps=4)
    assert torch.equal(a, b)
    triton_copy.triad(a, b, c, 3.0, block=1024, num_warps=4)
    torch.testing.assert_close(a, b + 3.0 * c)


def test_triton_copy_rejects_mismatched_buffers():
    from profiler import triton_copy

    with pytest.raises(ValueError, match="elements"):
        triton_copy.copy(torch.rand(8), torch.empty(9))


def test_datasheet_rooflines_of_a_catalog_chip():
    roof = from_chip("H200-SXM", "NVIDIA H200")
    chip = get_chip("H200-SXM")
    assert roof.datasheet and roof.flop_per_s["bf16"] == chip.bf16_tflops * 1e12
    assert roof.flop_per_s["fp8"] == chip.fp8_tflops * 1e12 and roof.flop_per_s["fp32"] < roof.flop_per_s["bf16"]
    assert roof.mem_bw_bytes_per_s == 4.8e12
    assert roof.mem_capacity_bytes > 143771 * (1 << 20)  # what an H200 reports must fit under its bound
    assert "fp8" not in from_chip("A100-80G-SXM").flop_per_s


@pytest.mark.parametrize("name, chip", [("NVIDIA H200", "H200-SXM"), ("NVIDIA H100 80GB HBM3", "H100-SXM"),
                                        ("NVIDIA A100-SXM4-80GB", "A100-80G-SXM"), ("NVIDIA L40S", "L40S"),
                                        ("NVIDIA GeForce RTX 4090", None)])
def test_device_names_map_to_catalog_chips(name, chip):
    assert chip_for_device_name(name) == chip


def test_cpu_rooflines_are_positive_estimates():
    roof = for_cpu()
    assert not roof.datasheet and all(v > 0 for v in roof.flop_per_s.values()) and roof.mem_bw_bytes_per_s > 0


def test_the_gpu_bandwidth_path_runs_its_triton_variants(monkeypatch):
    """The GPU-only branch of the memory probe, on tiny buffers in the Triton interpreter."""
    from profiler import memory

    monkeypatch.setattr(memory, "is_cuda", lambda device: True)
    monkeypatch.setattr(memory, "TARGET_S", 0.0)
    out, skipped = memory._bandwidths(torch, torch.device("cpu"), for_cpu(), buffer_bytes=16 * 1024, reps=2)
    names = [m.name for m in out]
    assert names == ["copy torch", "triad torch", "copy triton", "triad triton"] and not skipped
    from profiler.triton_copy import VARIANTS

    assert {m.params["block"] for m in out if "triton" in m.name} <= {block for block, _ in VARIANTS}


def test_the_fp8_matmul_call_is_well_formed():
    """torch._scaled_mm as the GPU path calls it (the CPU build runs it too, slowly)."""
    from profiler.compute import _matmul

    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no fp8")
    try:
        out = _matmul(torch, "fp8", 32, 48, 64, torch.device("cpu"))()
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"no CPU fp8 matmul in this torch: {exc}")
    assert out.shape == (32, 48) and out.dtype == torch.bfloat16
