"""Triton varlen causal prefill attention against the torch reference."""

from __future__ import annotations

import pytest
import torch

from placer_kernels import reference
from placer_kernels.prefill_attention import prefill_attention

HEADS = [(4, 1, 64), (6, 2, 32), (8, 8, 32)]  # (Hq, Hkv, head_dim)
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _case(randn, as_int32, lens, hq, hkv, head_dim, dtype):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    q = randn(cu[-1], hq, head_dim, dtype=dtype)
    k = randn(cu[-1], hkv, head_dim, dtype=dtype)
    v = randn(cu[-1], hkv, head_dim, dtype=dtype)
    return (q, k, v, as_int32(cu), head_dim**-0.5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq,hkv,head_dim", HEADS)
def test_prefill_matches_reference(randn, as_int32, tol, hq, hkv, head_dim, dtype):
    args = _case(randn, as_int32, [1, 17, 50], hq, hkv, head_dim, dtype)
    out = prefill_attention(*args)
    assert out.dtype == dtype and out.shape == args[0].shape
    torch.testing.assert_close(out.float(), reference.prefill_attention(*args).float(), **tol(dtype))


def test_prefill_handles_empty_sequences_and_strided_q(randn, as_int32, tol):
    """An empty sequence in the batch, and q/k/v as views of one packed qkv tensor."""
    lens, hq, hkv, d = [16, 0, 33], 4, 2, 32
    qkv = randn(sum(lens), hq + 2 * hkv, d)
    q, k, v = qkv.split([hq, hkv, hkv], dim=1)
    cu = as_int32([0, 16, 16, 49])
    torch.testing.assert_close(
        prefill_attention(q, k, v, cu, d**-0.5), reference.prefill_attention(q, k, v, cu, d**-0.5),
        **tol(torch.float32),
    )


def test_prefill_with_length_hint_agrees(randn, as_int32, tol):
    args = _case(randn, as_int32, [20, 3, 37], 4, 1, 16, torch.float32)
    torch.testing.assert_close(prefill_attention(*args, max_seq_len=40), prefill_attention(*args), **tol(torch.float32))
    with pytest.raises(ValueError, match="max_seq_len"):
        reference.prefill_attention(*args, max_seq_len=36)


def test_prefill_first_token_attends_only_to_itself(randn, as_int32):
    q, k, v, cu, scale = _case(randn, as_int32, [5, 3], 2, 2, 16, torch.float32)
    out = prefill_attention(q, k, v, cu, scale)
    torch.testing.assert_close(out[0], v[0])
    torch.testing.assert_close(out[5], v[5])


def test_prefill_rejects_bad_inputs(randn, as_int32):
    q, k, v, cu, scale = _case(randn, as_int32, [4, 4], 2, 1, 16, torch.float32)
    with pytest.raises(ValueError, match="cu_seqlens must start at 0"):
        prefill_attention(q, k, v, as_int32([0, 4, 7]), scale)
    with pytest.raises(ValueError, match="cu_seqlens must start at 0"):
        prefill_attention(q, k, v, as_int32([0, 5, 4, 8]), scale)
    with pytest.raises(ValueError, match="cu_seqlens must be int32"):
        prefill_attention(q, k, v, cu.long(), scale)
    with pytest.raises(ValueError, match="v shape"):
        prefill_attention(q, k, v[:, :, :8], cu, scale)
    with pytest.raises(ValueError, match="k shape"):
        prefill_attention(q, k[:7], v[:7], cu, scale)
    with pytest.raises(ValueError, match="k dtype"):
        prefill_attention(q, k.half(), v.half(), cu, scale)


@pytest.mark.gpu
def test_prefill_long_sequences_on_gpu(randn, as_int32, tol, cuda_device):
    lens = [1, 700, 2049]
    cu = [0, 1, 701, 2750]
    q = randn(cu[-1], 32, 128, dtype=torch.bfloat16, device_=cuda_device)
    k = randn(cu[-1], 8, 128, dtype=torch.bfloat16, device_=cuda_device)
    v = randn(cu[-1], 8, 128, dtype=torch.bfloat16, device_=cuda_device)
    assert sum(lens) == cu[-1]
    args = (q, k, v, as_int32(cu, cuda_device), 128**-0.5)
    torch.testing.assert_close(
        prefill_attention(*args).float(), reference.prefill_attention(*args).float(), **tol(torch.bfloat16)
    )
