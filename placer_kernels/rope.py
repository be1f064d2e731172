"""Rotary position embedding (rotate-half, Llama/NeoX style) in Triton: one program per token.

Math: for token t at position p and pair i < D/2, a = p * inv_freq[i], inv_freq[i] = theta^(-2i/D):
    out[i]       = x[i] cos a - x[i + D/2] sin a
    out[i + D/2] = x[i + D/2] cos a + x[i] sin a
applied to every head of q [T, Hq, D] and k [T, Hkv, D]; returns new tensors. inv_freq comes from
``placer_kernels.reference.rope_inv_freq`` so both backends use bit-identical angles.

Bytes moved: read q and k, write their rotated copies, 2 * T * (Hq + Hkv) * D * elem; positions
and inv_freq are tiny.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from torch import Tensor

from placer_kernels.reference import check_rope_inputs, check_triton_device, rope_inv_freq


@functools.lru_cache(maxsize=32)
def _inv_freq(head_dim: int, theta: float, device: torch.device) -> Tensor:
    # Cached per device so a step does no host-to-device copy (and CUDA graphs can capture it).
    return rope_inv_freq(head_dim, theta, device)


@triton.jit
def _rotate_heads(
    src_ptr, dst_ptr, stride_src_h, stride_dst_h, num_heads, cos, sin,
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr,
):
    offs_h = tl.arange(0, BLOCK_H)
    offs_f = tl.arange(0, BLOCK_HALF)
    mask = (offs_h[:, None] < num_heads) & (offs_f[None, :] < HALF)
    src = src_ptr + offs_h[:, None] * stride_src_h + offs_f[None, :]
    dst = dst_ptr + offs_h[:, None] * stride_dst_h + offs_f[None, :]
    x1 = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=mask, other=0.0).to(tl.float32)
    out_ty = dst_ptr.dtype.element_ty
    tl.store(dst, (x1 * cos[None, :] - x2 * sin[None, :]).to(out_ty), mask=mask)
    tl.store(dst + HALF, (x2 * cos[None, :] + x1 * sin[None, :]).to(out_ty), mask=mask)


@triton.jit
def _rope_kernel(
    q_ptr, k_ptr, q_out_ptr, k_out_ptr, positions_ptr, inv_freq_ptr,
    stride_qt, stride_qh, stride_kt, stride_kh,
    stride_qot, stride_qoh, stride_kot, stride_koh,
    num_q_heads, num_kv_heads,
    HALF: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HKV: tl.constexpr, BLOCK_HALF: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    offs_f = tl.arange(0, BLOCK_HALF)
    inv_freq = tl.load(inv_freq_ptr + offs_f, mask=offs_f < HALF, other=0.0)
    angle = tl.load(positions_ptr + t).to(tl.float32) * inv_freq
    cos = tl.cos(angle)
    sin = tl.sin(angle)
    _rotate_heads(q_ptr + t * stride_qt, q_out_ptr + t * stride_qot, stride_qh, stride_qoh,
                  num_q_heads, cos, sin, HALF, BLOCK_HQ, BLOCK_HALF)
    _rotate_heads(k_ptr + t * stride_kt, k_out_ptr + t * stride_kot, stride_kh, stride_koh,
                  num_kv_heads, cos, sin, HALF, BLOCK_HKV, BLOCK_HALF)


def apply_rope(q: Tensor, k: Tensor, positions: Tensor, theta: float) -> tuple[Tensor, Tensor]:
    """Rotate-half RoPE on q and k; same contract as ``placer_kernels.reference.apply_rope``."""
    check_rope_inputs(q, k, positions, theta)
    check_triton_device("q", q)
    tokens, num_q_heads, head_dim = q.shape
    num_kv_heads = k.shape[1]
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    if tokens == 0 or head_dim == 0:
        return q_out, k_out
    half = head_dim // 2
    inv_freq = _inv_freq(head_dim, float(theta), q.device)
    _rope_kernel[(tokens,)](
        q, k, q_out, k_out, positions, inv_freq,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        num_q_heads, num_kv_heads,
        HALF=half,
        BLOCK_HQ=triton.next_power_of_2(max(num_q_heads, 1)),
        BLOCK_HKV=triton.next_power_of_2(max(num_kv_heads, 1)),
        BLOCK_HALF=triton.next_power_of_2(half),
        num_warps=4,
    )
    return q_out, k_out
