"""Triton decode attention against the torch reference over a shuffled paged cache."""

from __future__ import annotations

import pytest
import torch

from placer_kernels import reference
from placer_kernels.decode_attention import decode_attention

HEADS = [(4, 1, 64), (6, 2, 32), (8, 8, 32)]  # (Hq, Hkv, head_dim)
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _case(make_paged, randn, as_int32, lens, hq, hkv, head_dim, block_size, dtype):
    kv = make_paged(lens, hkv, head_dim, block_size, dtype)
    q = randn(len(lens), hq, head_dim, dtype=dtype)
    args = (q, kv.k_cache, kv.v_cache, kv.page_table, as_int32(lens), head_dim**-0.5)
    return args


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq,hkv,head_dim", HEADS)
def test_decode_matches_reference(make_paged, randn, as_int32, tol, hq, hkv, head_dim, dtype):
    args = _case(make_paged, randn, as_int32, [1, 17, 130], hq, hkv, head_dim, 16, dtype)
    expected = reference.decode_attention(*args)
    for num_splits in (None, 3):
        out = decode_attention(*args, num_splits=num_splits)
        assert out.dtype == dtype and out.shape == args[0].shape
        torch.testing.assert_close(out.float(), expected.float(), **tol(dtype))


@pytest.mark.parametrize("block_size", [1, 8, 32])
def test_decode_handles_page_sizes_around_the_tile(make_paged, randn, as_int32, tol, block_size):
    args = _case(make_paged, randn, as_int32, [3, 33, 70], 4, 2, 32, block_size, torch.float32)
    torch.testing.assert_close(decode_attention(*args), reference.decode_attention(*args), **tol(torch.float32))


@pytest.mark.parametrize("num_splits", [2, 5, 64])
def test_decode_split_k_equals_single_split(make_paged, randn, as_int32, num_splits):
    """Splitting the context (flash-decoding) changes only rounding, also with empty splits."""
    args = _case(make_paged, randn, as_int32, [1, 40, 130], 6, 2, 32, 16, torch.float32)
    single = decode_attention(*args, num_splits=1)
    split = decode_attention(*args, num_splits=num_splits)
    torch.testing.assert_close(split, single, atol=1e-5, rtol=1e-5)


def test_decode_split_k_in_bf16_stays_within_one_rounding(make_paged, randn, as_int32):
    args = _case(make_paged, randn, as_int32, [130, 77], 8, 8, 32, 16, torch.bfloat16)
    single = decode_attention(*args, num_splits=1).float()
    split = decode_attention(*args, num_splits=4).float()
    torch.testing.assert_close(split, single, atol=1e-2, rtol=1e-2)


def test_decode_ignores_stale_cache_beyond_seq_len(make_paged, randn, as_int32):
    """Overwriting cache slots past seq_len (the next token's slot) must not change the output."""
    args = list(_case(make_paged, randn, as_int32, [20, 5], 2, 1, 16, 8, torch.float32))
    before = decode_attention(*args)
    k_cache = args[1].clone()
    page = int(args[3][0, 2])  # sequence 0's third block holds tokens 16..23; 20..23 are stale
    k_cache[page, 4:] = -50.0
    args[1] = k_cache
    torch.testing.assert_close(decode_attention(*args), before)


def _strided(t):
    """Same shape and values as t, but not contiguous (last dim strided)."""
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _bad_inputs(device):
    q = torch.zeros(2, 4, 32, device=device)
    k = torch.zeros(6, 16, 2, 32, device=device)
    pt = torch.zeros(2, 3, dtype=torch.int32, device=device)
    sl = torch.ones(2, dtype=torch.int32, device=device)
    return q, k, pt, sl


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda q, k, pt, sl: (q[0], k, k, pt, sl, 0.1), r"q must be \[batch"),
        (lambda q, k, pt, sl: (q, k[0], k[0], pt, sl, 0.1), r"k_cache must be"),
        (lambda q, k, pt, sl: (q, k, k[:, :8], pt, sl, 0.1), r"v_cache shape"),
        (lambda q, k, pt, sl: (q.half(), k, k, pt, sl, 0.1), r"k_cache dtype"),
        (lambda q, k, pt, sl: (q.double(), k.double(), k.double(), pt, sl, 0.1), r"q must be float16"),
        (lambda q, k, pt, sl: (q[:, :3], k, k, pt, sl, 0.1), r"q has 3 heads"),
        (lambda q, k, pt, sl: (q, k, k, pt.long(), sl, 0.1), r"page_table must be int32"),
        (lambda q, k, pt, sl: (q, k, k, pt, sl[:1], 0.1), r"batch mismatch"),
        (lambda q, k, pt, sl: (q, _strided(k), k, pt, sl, 0.1), r"k_cache must be contiguous"),
        (lambda q, k, pt, sl: (_strided(q), k, k, pt, sl, 0.1), r"q must be contiguous in its last dim"),
        (lambda q, k, pt, sl: (q, k, k, pt, sl, float("nan")), r"sm_scale"),
    ],
)
def test_decode_rejects_bad_inputs(device, mutate, match):
    with pytest.raises(ValueError, match=match):
        decode_attention(*mutate(*_bad_inputs(device)))


def test_decode_rejects_bad_num_splits_and_head_dim(device):
    q, k, pt, sl = _bad_inputs(device)
    with pytest.raises(ValueError, match="num_splits"):
        decode_attention(q, k, k, pt, sl, 0.1, num_splits=0)
    q48, k48 = torch.zeros(2, 4, 48, device=device), torch.zeros(6, 16, 2, 48, device=device)
    with pytest.raises(ValueError, match="head_dim a power of two"):
        decode_attention(q48, k48, k48, pt, sl, 0.1)


def test_triton_backend_refuses_cpu_tensors_without_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q = torch.zeros(1, 1, 16)
    k = torch.zeros(1, 4, 1, 16)
    with pytest.raises(ValueError, match=r"get_ops\('torch'\)"):
        decode_attention(q, k, k, torch.zeros(1, 1, dtype=torch.int32), torch.ones(1, dtype=torch.int32), 0.25)


@pytest.mark.gpu
@pytest.mark.parametrize("block_size", [16, 64])
def test_decode_long_context_on_gpu(make_paged, randn, as_int32, tol, cuda_device, block_size):
    lens = [1, 1000, 4097, 8192]
    kv = make_paged(lens, 8, 128, block_size, torch.bfloat16, device_=cuda_device)
    q = randn(len(lens), 32, 128, dtype=torch.bfloat16, device_=cuda_device)
    args = (q, kv.k_cache, kv.v_cache, kv.page_table, as_int32(lens, cuda_device), 128**-0.5)
    expected = reference.decode_attention(*args)
    for num_splits in (None, 1, 7, 32):
        out = decode_attention(*args, num_splits=num_splits)
        torch.testing.assert_close(out.float(), expected.float(), **tol(torch.bfloat16))
