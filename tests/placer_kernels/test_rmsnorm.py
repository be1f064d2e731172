"""Triton RMSNorm against the torch reference."""

from __future__ import annotations

import pytest
import torch

from placer_kernels import reference
from placer_kernels.rmsnorm import rms_norm

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 96), (7, 1000), (1, 8)])
def test_rms_norm_matches_reference(randn, tol, shape, dtype):
    x, weight = randn(*shape, dtype=dtype) * 3.0, randn(shape[-1], dtype=dtype)
    out = rms_norm(x, weight, 1e-5)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.float(), reference.rms_norm(x, weight, 1e-5).float(), **tol(dtype))


def test_rms_norm_accepts_row_strided_input(randn, tol):
    """A view of every other row (e.g. a slice of a fused projection) is normalised row by row."""
    x = randn(10, 64)[::2]
    weight = randn(64)
    torch.testing.assert_close(rms_norm(x, weight, 1e-6), reference.rms_norm(x, weight, 1e-6), **tol(torch.float32))


def test_rms_norm_rejects_bad_inputs(randn):
    x = randn(4, 32)
    with pytest.raises(ValueError, match="weight shape"):
        rms_norm(x, randn(16), 1e-6)
    with pytest.raises(ValueError, match="x must be float16"):
        rms_norm(x.double(), randn(32), 1e-6)
    with pytest.raises(ValueError, match="eps"):
        rms_norm(x, randn(32), -1.0)
    with pytest.raises(ValueError, match="x must be contiguous in its last dim"):
        rms_norm(x.t(), randn(4), 1e-6)
