"""The torch references against a naive dense computation (SDPA on contiguous, un-paged K/V)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from placer_kernels import get_ops, reference

HEADS = [(4, 1), (6, 2), (8, 8)]  # (Hq, Hkv)


def _sdpa(q, k, v, scale, mask=None, causal=False):
    """q [M, Hq, D], k/v [N, Hkv, D] -> [M, Hq, D], fp32, kv heads expanded explicitly."""
    group = q.shape[1] // k.shape[1]
    qh = q.float().transpose(0, 1)[None]
    kh = k.float().repeat_interleave(group, dim=1).transpose(0, 1)[None]
    vh = v.float().repeat_interleave(group, dim=1).transpose(0, 1)[None]
    out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, is_causal=causal, scale=scale)
    return out[0].transpose(0, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hq,hkv", HEADS)
def test_decode_reference_matches_dense_sdpa(make_paged, randn, as_int32, tol, hq, hkv, dtype):
    lens, head_dim, block_size = [1, 17, 130], 32, 16
    kv = make_paged(lens, hkv, head_dim, block_size, dtype)
    q = randn(len(lens), hq, head_dim, dtype=dtype)
    scale = head_dim**-0.5
    out = reference.decode_attention(q, kv.k_cache, kv.v_cache, kv.page_table, as_int32(lens), scale)
    assert out.dtype == dtype and out.shape == q.shape
    for b in range(len(lens)):
        dense = _sdpa(q[b : b + 1], kv.keys[b], kv.values[b], scale)
        torch.testing.assert_close(out[b : b + 1].float(), dense, **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hq,hkv", HEADS)
def test_extend_reference_matches_dense_masked_sdpa(make_paged, randn, as_int32, tol, hq, hkv, dtype):
    prefix, extend, head_dim, block_size = [0, 5, 100], [3, 17, 30], 32, 16
    kv = make_paged([p + e for p, e in zip(prefix, extend)], hkv, head_dim, block_size, dtype)
    q = randn(sum(extend), hq, head_dim, dtype=dtype)
    scale = head_dim**-0.5
    out = reference.extend_attention(
        q, kv.k_cache, kv.v_cache, kv.page_table, as_int32(prefix), as_int32(extend), scale
    )
    start = 0
    for b, (p, e) in enumerate(zip(prefix, extend)):
        # new token i sees keys 0..p+i
        mask = torch.ones(e, p + e, dtype=torch.bool, device=q.device).tril(diagonal=p)
        dense = _sdpa(q[start : start + e], kv.keys[b], kv.values[b], scale, mask=mask)
        torch.testing.assert_close(out[start : start + e].float(), dense, **tol(dtype))
        start += e


@pytest.mark.parametrize("hq,hkv", HEADS)
def test_prefill_reference_matches_dense_causal_sdpa(randn, as_int32, tol, hq, hkv):
    lens, head_dim = [1, 17, 40], 32
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    q, k, v = randn(cu[-1], hq, head_dim), randn(cu[-1], hkv, head_dim), randn(cu[-1], hkv, head_dim)
    out = reference.prefill_attention(q, k, v, as_int32(cu), head_dim**-0.5)
    for lo, hi in zip(cu[:-1], cu[1:]):
        dense = _sdpa(q[lo:hi], k[lo:hi], v[lo:hi], head_dim**-0.5, causal=True)
        torch.testing.assert_close(out[lo:hi], dense, **tol(torch.float32))


def test_prefill_reference_keeps_sequences_apart(randn, as_int32):
    """Changing one sequence's keys must not change another sequence's output."""
    q, k, v = randn(10, 2, 16), randn(10, 2, 16), randn(10, 2, 16)
    cu = as_int32([0, 4, 10])
    before = reference.prefill_attention(q, k, v, cu, 0.25)
    k2 = k.clone()
    k2[:4] += 5.0
    after = reference.prefill_attention(q, k2, v, cu, 0.25)
    torch.testing.assert_close(after[4:], before[4:])
    assert not torch.allclose(after[:4], before[:4])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_reference_matches_torch(randn, tol, dtype):
    x, w = randn(3, 5, 96, dtype=dtype), randn(96, dtype=dtype)
    out = reference.rms_norm(x, w, 1e-6)
    expected = F.rms_norm(x.float(), (96,), w.float(), eps=1e-6)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), expected, **tol(dtype))


def test_rms_norm_reference_gives_unit_rms(randn, device):
    x = randn(4, 64) * 37.0
    out = reference.rms_norm(x, torch.ones(64, device=device), 1e-6)
    torch.testing.assert_close(out.pow(2).mean(-1), torch.ones(4, device=device), atol=1e-4, rtol=0)


def test_rope_reference_is_identity_at_position_zero_and_keeps_norms(randn, device):
    q, k = randn(3, 4, 32), randn(3, 2, 32)
    positions = torch.tensor([0, 9, 40000], device=device)
    q_rot, k_rot = reference.apply_rope(q, k, positions, 10000.0)
    torch.testing.assert_close(q_rot[0], q[0])
    torch.testing.assert_close(k_rot[0], k[0])
    # each (i, i + D/2) pair is rotated, so pair norms are kept
    def pair_norms(x):
        return x[..., :16].pow(2) + x[..., 16:].pow(2)
    torch.testing.assert_close(pair_norms(q_rot), pair_norms(q), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(q_rot[1], q[1])


def test_rope_reference_scores_depend_only_on_relative_position(randn, device):
    """<rope(q, m), rope(k, n)> is a function of m - n: the property RoPE exists for."""
    q, k = randn(1, 1, 64), randn(1, 1, 64)

    def score(m: int, n: int) -> float:
        pos_q = torch.tensor([m], device=device)
        pos_k = torch.tensor([n], device=device)
        qr, _ = reference.apply_rope(q, k, pos_q, 10000.0)
        _, kr = reference.apply_rope(q, k, pos_k, 10000.0)
        return float((qr * kr).sum())

    assert score(7, 3) == pytest.approx(score(107, 103), abs=1e-3)
    assert score(7, 3) != pytest.approx(score(7, 5), abs=1e-3)


def test_rope_reference_matches_complex_rotation(randn, device):
    """Rotate-half RoPE == multiplying x[:D/2] + i x[D/2:] by e^{i p inv_freq}."""
    q, k = randn(5, 3, 16, dtype=torch.float32), randn(5, 1, 16)
    positions = torch.tensor([0, 1, 2, 500, 9999], device=device)
    q_rot, _ = reference.apply_rope(q, k, positions, 500000.0)
    inv_freq = 500000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64, device=device) / 16)
    angle = positions.double()[:, None, None] * inv_freq
    z = torch.complex(q[..., :8].double(), q[..., 8:].double()) * torch.exp(1j * angle)
    expected = torch.cat([z.real, z.imag], dim=-1).float()
    torch.testing.assert_close(q_rot, expected, atol=1e-4, rtol=1e-4)


def test_reference_rejects_lengths_past_the_page_table(make_paged, randn, as_int32):
    kv = make_paged([5, 9], 1, 16, 4, torch.float32)
    q = randn(2, 1, 16)
    too_long = kv.page_table.shape[1] * 4 + 1
    with pytest.raises(ValueError, match="seq_lens"):
        reference.decode_attention(q, kv.k_cache, kv.v_cache, kv.page_table, as_int32([5, too_long]), 0.25)
    with pytest.raises(ValueError, match="extend_lens sum"):
        reference.extend_attention(
            randn(3, 1, 16), kv.k_cache, kv.v_cache, kv.page_table, as_int32([0, 0]), as_int32([1, 1]), 0.25
        )


def test_get_ops_names_unknown_backend():
    with pytest.raises(ValueError, match=r"'cuda'.*torch, triton"):
        get_ops("cuda")


def test_backends_take_the_same_optional_arguments():
    """The engine can switch backends without changing its calls."""
    import inspect

    torch_ops = get_ops("torch")
    triton_ops = get_ops("triton")
    for name in ("decode_attention", "extend_attention", "prefill_attention", "rms_norm", "apply_rope"):
        torch_params = list(inspect.signature(getattr(torch_ops, name)).parameters)
        triton_params = list(inspect.signature(getattr(triton_ops, name)).parameters)
        assert torch_params == triton_params, name


def test_torch_backend_is_the_reference():
    ops = get_ops("torch")
    assert ops.backend == "torch"
    assert ops.decode_attention is reference.decode_attention
    assert ops.apply_rope is reference.apply_rope


def test_import_kernels_does_not_import_triton():
    code = "import sys, placer_kernels; placer_kernels.get_ops('torch'); sys.exit('triton' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr or "placer_kernels imported triton"
