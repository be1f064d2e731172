"""Triton RoPE against the torch reference."""

from __future__ import annotations

import pytest
import torch

from placer_kernels import reference
from placer_kernels.rope import apply_rope

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq,hkv,head_dim", [(4, 1, 64), (6, 2, 32), (8, 8, 48)])
def test_rope_matches_reference(randn, tol, device, hq, hkv, head_dim, dtype):
    q, k = randn(5, hq, head_dim, dtype=dtype), randn(5, hkv, head_dim, dtype=dtype)
    positions = torch.tensor([0, 1, 17, 4095, 131071], device=device)
    q_out, k_out = apply_rope(q, k, positions, 500000.0)
    q_ref, k_ref = reference.apply_rope(q, k, positions, 500000.0)
    assert q_out.dtype == dtype and q_out.shape == q.shape and k_out.shape == k.shape
    torch.testing.assert_close(q_out.float(), q_ref.float(), **tol(dtype))
    torch.testing.assert_close(k_out.float(), k_ref.float(), **tol(dtype))


def test_rope_leaves_inputs_untouched_and_accepts_int32_positions(randn, device, tol):
    q, k = randn(3, 2, 16), randn(3, 1, 16)
    q_copy, k_copy = q.clone(), k.clone()
    positions = torch.tensor([3, 2, 1], dtype=torch.int32, device=device)
    q_out, k_out = apply_rope(q, k, positions, 10000.0)
    torch.testing.assert_close(q, q_copy)
    torch.testing.assert_close(k, k_copy)
    torch.testing.assert_close(q_out, reference.apply_rope(q, k, positions, 10000.0)[0], **tol(torch.float32))


def test_rope_rejects_bad_inputs(randn, device):
    q, k = randn(3, 2, 16), randn(3, 1, 16)
    positions = torch.arange(3, device=device)
    with pytest.raises(ValueError, match="head_dim must be even"):
        apply_rope(randn(3, 2, 15), randn(3, 1, 15), positions, 10000.0)
    with pytest.raises(ValueError, match="positions shape"):
        apply_rope(q, k, positions[:2], 10000.0)
    with pytest.raises(ValueError, match="positions must be int32 or int64"):
        apply_rope(q, k, positions.float(), 10000.0)
    with pytest.raises(ValueError, match="k shape"):
        apply_rope(q, randn(3, 1, 8), positions, 10000.0)
