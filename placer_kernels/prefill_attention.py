"""Varlen causal prefill attention on contiguous q/k/v (Triton, flash-attention forward).

Math: sequence b owns rows s_b = cu_seqlens[b] .. cu_seqlens[b+1]-1 (length L_b). For its token i
and q head h (kv head g = h // (Hq / Hkv)):
    out[s_b + i, h] = softmax(q[s_b + i, h] . k[s_b : s_b+i+1, g]^T * sm_scale) v[s_b : s_b+i+1, g].

One program per (q head, tile of BLOCK_M queries, sequence): q tile in registers, K/V streamed in
BLOCK_N-token tiles with an online base-2 softmax and ``tl.dot``; keys before the tile need no mask
(phase 1), the diagonal gets the causal mask (phase 2), keys after it are never read.

Bytes moved: q and out, 2 * T * Hq * D * elem; k and v, 2 * T * Hkv * D * elem from HBM (re-read
per q tile and per head of a group from L2). FLOPs: 4 * Hq * D * sum_b L_b (L_b + 1) / 2.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from placer_kernels.extend_attention import AttentionConfig
from placer_kernels.decode_attention import dot_flags, mma
from placer_kernels.reference import (
    check_prefill_inputs,
    check_prefill_lengths,
    check_triton_device,
    check_triton_head_dim,
)

LOG2E = 1.4426950408889634


@triton.jit
def _prefill_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, cu_seqlens_ptr,
    qk_scale,  # sm_scale * log2(e)
    stride_qt, stride_qh,
    stride_kt, stride_kh,
    stride_vt, stride_vh,
    stride_ot, stride_oh,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    head = tl.program_id(0)
    # Heaviest (last) query tiles first, so the causal tail does not straggle.
    m_block = tl.num_programs(1) - 1 - tl.program_id(1)
    b = tl.program_id(2)

    seq_start = tl.load(cu_seqlens_ptr + b)
    seq_len = tl.load(cu_seqlens_ptr + b + 1) - seq_start
    if m_block * BLOCK_M >= seq_len:
        return
    kv_head = head // GROUP

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = offs_m < seq_len
    offs_d = tl.arange(0, HEAD_DIM)
    rows = (seq_start + offs_m).to(tl.int64)
    q = tl.load(
        q_ptr + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
        mask=mask_m[:, None], other=0.0,
    )

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    k_seq = k_ptr + seq_start.to(tl.int64) * stride_kt + kv_head * stride_kh
    v_seq = v_ptr + seq_start.to(tl.int64) * stride_vt + kv_head * stride_vh

    # Phase 1: keys before the tile's first query, unmasked but for the tile tail.
    diag_start = m_block * BLOCK_M
    for n0 in range(0, diag_start, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_seq + offs_n[:, None].to(tl.int64) * stride_kt + offs_d[None, :])
        qk = mma(q, tl.trans(k), DOT_PRECISION, UPCAST_DOT) * qk_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_seq + offs_n[:, None].to(tl.int64) * stride_vt + offs_d[None, :])
        acc = acc * alpha[:, None] + mma(p.to(v.dtype), v, DOT_PRECISION, UPCAST_DOT)
        m_i = m_new

    # Phase 2: the diagonal tile(s), causal.
    diag_end = tl.minimum((m_block + 1) * BLOCK_M, seq_len)
    for n0 in range(diag_start, diag_end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask_n = offs_n < diag_end
        k = tl.load(k_seq + offs_n[:, None].to(tl.int64) * stride_kt + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)
        qk = mma(q, tl.trans(k), DOT_PRECISION, UPCAST_DOT) * qk_scale
        causal = mask_n[None, :] & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(causal, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_seq + offs_n[:, None].to(tl.int64) * stride_vt + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)
        acc = acc * alpha[:, None] + mma(p.to(v.dtype), v, DOT_PRECISION, UPCAST_DOT)
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None],
    )


def default_config(device: torch.device, head_dim: int) -> AttentionConfig:
    """Hopper-tuned tiles on a GPU; 16x16 tiles under the interpreter so loops and tails run.

    Phase 1 reads whole BLOCK_N tiles below the diagonal unmasked, so BLOCK_M must be a multiple
    of BLOCK_N.
    """
    if device.type == "cpu":
        return AttentionConfig(block_m=16, block_n=16, num_warps=4, num_stages=1)
    if head_dim >= 128:  # fastest of 8 variants on an H200 (bench --sweep), extend and prefill alike
        return AttentionConfig(block_m=128, block_n=128, num_warps=8, num_stages=3)
    return AttentionConfig(block_m=128, block_n=64, num_warps=4, num_stages=3)


def launch(
    q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, sm_scale: float, max_seq_len: int,
    config: AttentionConfig,
) -> Tensor:
    """Run the kernel with explicit tiles (inputs already validated, max_seq_len known)."""
    if config.block_m % config.block_n:
        raise ValueError(f"block_m must be a multiple of block_n, got {config}")
    total, num_q_heads, head_dim = q.shape
    out = torch.empty_like(q)
    batch = cu_seqlens.shape[0] - 1
    if total == 0 or batch == 0 or max_seq_len == 0:
        return out
    grid = (num_q_heads, triton.cdiv(max_seq_len, config.block_m), batch)
    _prefill_kernel[grid](
        q, k, v, out, cu_seqlens,
        sm_scale * LOG2E,
        q.stride(0), q.stride(1),
        k.stride(0), k.stride(1),
        v.stride(0), v.stride(1),
        out.stride(0), out.stride(1),
        GROUP=num_q_heads // k.shape[1], HEAD_DIM=head_dim,
        BLOCK_M=config.block_m, BLOCK_N=config.block_n,
        **dot_flags(q),
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
    return out


def prefill_attention(
    q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, sm_scale: float, max_seq_len: int | None = None
) -> Tensor:
    """Varlen causal attention; same contract as ``placer_kernels.reference.prefill_attention``.

    ``max_seq_len`` (>= every sequence length, known to the scheduler) sizes the grid without a
    device sync, and cu_seqlens is trusted. Without it the launcher copies cu_seqlens to the host
    once (a sync) to size the grid and check it.
    """
    check_prefill_inputs(q, k, v, cu_seqlens, sm_scale)
    check_triton_device("q", q)
    check_triton_head_dim(q)
    if max_seq_len is not None:
        if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int) or max_seq_len < 0:
            raise ValueError(f"max_seq_len must be an int >= 0, got {max_seq_len!r}")
        config = default_config(q.device, q.shape[-1])
        return launch(q, k, v, cu_seqlens, float(sm_scale), min(max_seq_len, q.shape[0]), config)
    bounds = cu_seqlens.cpu().tolist()
    steps = [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])]
    check_prefill_lengths(q, bounds[0], bounds[-1], min(steps, default=0))
    max_len = max(steps, default=0)
    return launch(q, k, v, cu_seqlens, float(sm_scale), max_len, default_config(q.device, q.shape[-1]))
