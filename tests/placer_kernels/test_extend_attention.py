"""Triton extend attention against the torch reference: new tokens over a paged cached prefix."""

from __future__ import annotations

import pytest
import torch

from placer_kernels import reference
from placer_kernels.extend_attention import extend_attention

HEADS = [(4, 1, 64), (6, 2, 32), (8, 8, 32)]  # (Hq, Hkv, head_dim)
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _case(make_paged, randn, as_int32, prefix, extend, hq, hkv, head_dim, block_size, dtype):
    kv = make_paged([p + e for p, e in zip(prefix, extend)], hkv, head_dim, block_size, dtype)
    q = randn(sum(extend), hq, head_dim, dtype=dtype)
    return (q, kv.k_cache, kv.v_cache, kv.page_table, as_int32(prefix), as_int32(extend), head_dim**-0.5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq,hkv,head_dim", HEADS)
def test_extend_matches_reference(make_paged, randn, as_int32, tol, hq, hkv, head_dim, dtype):
    # prefix 0 (a plain prefill through the cache), short and long prefixes; extends of 1
    # (a decode step), a partial tile and several tiles.
    args = _case(make_paged, randn, as_int32, [0, 5, 100], [17, 1, 40], hq, hkv, head_dim, 16, dtype)
    out = extend_attention(*args)
    assert out.dtype == dtype and out.shape == args[0].shape
    torch.testing.assert_close(out.float(), reference.extend_attention(*args).float(), **tol(dtype))


def test_extend_with_length_hint_skips_the_sync_and_agrees(make_paged, randn, as_int32, tol):
    args = _case(make_paged, randn, as_int32, [3, 40], [33, 5], 4, 2, 32, 16, torch.float32)
    hinted = extend_attention(*args, max_extend_len=33)
    torch.testing.assert_close(hinted, extend_attention(*args), **tol(torch.float32))
    with pytest.raises(ValueError, match="max_extend_len"):
        extend_attention(*args, max_extend_len=-1)
    with pytest.raises(ValueError, match="max_extend_len"):
        reference.extend_attention(*args, max_extend_len=32)  # the torch backend checks the hint


@pytest.mark.parametrize("block_size", [1, 8, 32])
def test_extend_handles_page_sizes_and_empty_extends(make_paged, randn, as_int32, tol, block_size):
    args = _case(make_paged, randn, as_int32, [33, 0, 7], [20, 0, 9], 4, 2, 32, block_size, torch.float32)
    torch.testing.assert_close(extend_attention(*args), reference.extend_attention(*args), **tol(torch.float32))


def test_extend_of_one_token_equals_decode(make_paged, randn, as_int32, tol):
    """Extending by one token is a decode step: both kernels must agree."""
    from placer_kernels.decode_attention import decode_attention

    args = _case(make_paged, randn, as_int32, [16, 99], [1, 1], 6, 2, 32, 16, torch.float32)
    q, k_cache, v_cache, page_table, prefix, extend, scale = args
    seq_lens = (prefix + extend).to(torch.int32)
    torch.testing.assert_close(
        extend_attention(*args), decode_attention(q, k_cache, v_cache, page_table, seq_lens, scale),
        **tol(torch.float32),
    )


def test_extend_is_causal_among_new_tokens(make_paged, randn, as_int32):
    """A later new token's K/V must not change an earlier new token's output."""
    args = list(_case(make_paged, randn, as_int32, [10], [20], 2, 1, 16, 8, torch.float32))
    before = extend_attention(*args)
    k_cache = args[1].clone()
    last_page = int(args[3][0, (10 + 19) // 8])
    k_cache[last_page, (10 + 19) % 8] += 10.0  # key of the last new token
    args[1] = k_cache
    after = extend_attention(*args)
    torch.testing.assert_close(after[:19], before[:19])
    assert not torch.allclose(after[19], before[19])


def test_extend_rejects_inconsistent_lengths(make_paged, randn, as_int32):
    q, k_cache, v_cache, page_table, prefix, extend, scale = _case(
        make_paged, randn, as_int32, [4, 4], [3, 3], 2, 1, 16, 8, torch.float32
    )
    with pytest.raises(ValueError, match="extend_lens sum to 6 but q has 5 rows"):
        extend_attention(q[:5], k_cache, v_cache, page_table, prefix, extend, scale)
    with pytest.raises(ValueError, match="cache slots"):
        extend_attention(q, k_cache, v_cache, page_table, as_int32([4, 400]), extend, scale)
    with pytest.raises(ValueError, match="batch mismatch"):
        extend_attention(q, k_cache, v_cache, page_table, prefix[:1], extend, scale)
    with pytest.raises(ValueError, match="extend_lens must be int32"):
        extend_attention(q, k_cache, v_cache, page_table, prefix, extend.long(), scale)
    with pytest.raises(ValueError, match=r"q must be \[total_new_tokens"):
        extend_attention(q[None], k_cache, v_cache, page_table, prefix, extend, scale)


@pytest.mark.gpu
def test_extend_long_prefix_on_gpu(make_paged, randn, as_int32, tol, cuda_device):
    prefix, extend = [0, 500, 3000], [600, 130, 1]
    kv = make_paged([p + e for p, e in zip(prefix, extend)], 8, 128, 16, torch.bfloat16, device_=cuda_device)
    q = randn(sum(extend), 32, 128, dtype=torch.bfloat16, device_=cuda_device)
    args = (q, kv.k_cache, kv.v_cache, kv.page_table, as_int32(prefix, cuda_device),
            as_int32(extend, cuda_device), 128**-0.5)
    torch.testing.assert_close(
        extend_attention(*args).float(), reference.extend_attention(*args).float(), **tol(torch.bfloat16)
    )
