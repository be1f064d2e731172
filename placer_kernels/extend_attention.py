"""Extend attention: new tokens attend to a paged cached prefix and causally to each other (Triton).

Math: sequence b has P_b = prefix_lens[b] cached tokens and E_b = extend_lens[b] new ones, whose
K/V are already in the paged cache at positions P_b .. P_b+E_b-1. New token i (absolute
position P_b + i, row qo_start[b] + i of the packed q) computes, per q head h (kv head g),
    out[i, h] = softmax(q[i, h] . K[b, 0:P_b+i+1, g]^T * sm_scale) V[b, 0:P_b+i+1, g].

Flash-attention forward: one program per (q head, tile of BLOCK_M new tokens, sequence). It keeps
its q tile in registers and streams K/V tiles of BLOCK_N tokens from the paged cache (page id per
token from the page table) with an online base-2 softmax and ``tl.dot`` on both products. Keys
before the tile's first query need no mask (phase 1); the tile's own diagonal gets the causal mask
(phase 2). Programs of the heads sharing a kv head are adjacent in the grid, so K/V hit L2.

Bytes moved: q and out, 2 * T * Hq * D * elem; K and V, 2 * Hkv * D * elem * sum_b(ceil(E_b/BLOCK_M)
* (P_b + E_b)) * Hq/Hkv from L2/HBM (HBM sees about once per kv head when L2 holds the tile set).
FLOPs: 4 * Hq * D * sum_b sum_{i<E_b} (P_b + i + 1)   (QK^T and PV, causal work only).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor

from placer_kernels.decode_attention import dot_flags, mma
from placer_kernels.reference import (
    check_extend_inputs,
    check_extend_lengths,
    check_triton_device,
    check_triton_head_dim,
)

LOG2E = 1.4426950408889634


@triton.jit
def _extend_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, page_table_ptr, prefix_lens_ptr, extend_lens_ptr, qo_start_ptr,
    qk_scale,  # sm_scale * log2(e)
    stride_qt, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_pt,
    stride_ot, stride_oh,
    GROUP: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    head = tl.program_id(0)
    # Heaviest (last) query tiles first, so the causal tail does not straggle.
    m_block = tl.num_programs(1) - 1 - tl.program_id(1)
    b = tl.program_id(2)

    extend_len = tl.load(extend_lens_ptr + b)
    if m_block * BLOCK_M >= extend_len:
        return
    prefix_len = tl.load(prefix_lens_ptr + b)
    qo_start = tl.load(qo_start_ptr + b)
    kv_head = head // GROUP

    offs_m = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = offs_m < extend_len
    offs_d = tl.arange(0, HEAD_DIM)
    rows = (qo_start + offs_m).to(tl.int64)
    q = tl.load(
        q_ptr + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
        mask=mask_m[:, None], other=0.0,
    )

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    page_row = page_table_ptr + b.to(tl.int64) * stride_pt
    k_head = k_ptr + kv_head * stride_kh
    v_head = v_ptr + kv_head * stride_vh

    # Phase 1: keys 0 .. P+m_block*BLOCK_M-1 precede every query of this tile.
    diag_start = prefix_len + m_block * BLOCK_M
    for n0 in range(0, diag_start, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask_n = offs_n < diag_start
        page = tl.load(page_row + offs_n // PAGE_SIZE, mask=mask_n, other=0).to(tl.int64)
        slot = offs_n % PAGE_SIZE
        k = tl.load(k_head + (page * stride_kb + slot * stride_kt)[:, None] + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)
        qk = mma(q, tl.trans(k), DOT_PRECISION, UPCAST_DOT) * qk_scale
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_head + (page * stride_vb + slot * stride_vt)[:, None] + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)
        acc = acc * alpha[:, None] + mma(p.to(v.dtype), v, DOT_PRECISION, UPCAST_DOT)
        m_i = m_new

    # Phase 2: the tile's own new tokens, causal. Its first key precedes every query of the
    # tile, so no row is fully masked in its first step.
    diag_end = prefix_len + tl.minimum((m_block + 1) * BLOCK_M, extend_len)
    q_pos = prefix_len + offs_m
    for n0 in range(diag_start, diag_end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask_n = offs_n < diag_end
        page = tl.load(page_row + offs_n // PAGE_SIZE, mask=mask_n, other=0).to(tl.int64)
        slot = offs_n % PAGE_SIZE
        k = tl.load(k_head + (page * stride_kb + slot * stride_kt)[:, None] + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)
        qk = mma(q, tl.trans(k), DOT_PRECISION, UPCAST_DOT) * qk_scale
        causal = mask_n[None, :] & (offs_n[None, :] <= q_pos[:, None])
        qk = tl.where(causal, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_head + (page * stride_vb + slot * stride_vt)[:, None] + offs_d[None, :],
                    mask=mask_n[:, None], other=0.0)
        acc = acc * alpha[:, None] + mma(p.to(v.dtype), v, DOT_PRECISION, UPCAST_DOT)
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(
        out_ptr + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty), mask=mask_m[:, None],
    )


@dataclass(frozen=True)
class AttentionConfig:
    """Tile and launch parameters of a flash-attention forward kernel."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def default_config(device: torch.device, head_dim: int) -> AttentionConfig:
    """Hopper-tuned tiles on a GPU; 16x16 tiles under the interpreter so loops and tails run."""
    if device.type == "cpu":
        return AttentionConfig(block_m=16, block_n=16, num_warps=4, num_stages=1)
    if head_dim >= 128:  # fastest of 8 variants on an H200 (bench --sweep), extend and prefill alike
        return AttentionConfig(block_m=128, block_n=128, num_warps=8, num_stages=3)
    return AttentionConfig(block_m=128, block_n=64, num_warps=4, num_stages=3)


def launch(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, page_table: Tensor, prefix_lens: Tensor,
    extend_lens: Tensor, sm_scale: float, max_extend_len: int, config: AttentionConfig,
) -> Tensor:
    """Run the kernel with explicit tiles (inputs already validated, max_extend_len known)."""
    total, num_q_heads, head_dim = q.shape
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty_like(q)
    batch = extend_lens.shape[0]
    if total == 0 or batch == 0 or max_extend_len == 0:
        return out
    qo_start = (torch.cumsum(extend_lens, 0, dtype=torch.int32) - extend_lens).contiguous()
    grid = (num_q_heads, triton.cdiv(max_extend_len, config.block_m), batch)
    _extend_kernel[grid](
        q, k_cache, v_cache, out, page_table, prefix_lens, extend_lens, qo_start,
        sm_scale * LOG2E,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        page_table.stride(0),
        out.stride(0), out.stride(1),
        GROUP=num_q_heads // num_kv_heads, HEAD_DIM=head_dim, PAGE_SIZE=page_size,
        BLOCK_M=config.block_m, BLOCK_N=config.block_n,
        **dot_flags(q),
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
    return out


def extend_attention(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    page_table: Tensor,
    prefix_lens: Tensor,
    extend_lens: Tensor,
    sm_scale: float,
    max_extend_len: int | None = None,
) -> Tensor:
    """Paged extend attention; same contract as ``placer_kernels.reference.extend_attention``.

    ``max_extend_len`` (>= every extend_lens[b], e.g. from the scheduler's host-side lengths) sizes
    the grid without touching the device: the call then never syncs, and the lengths are trusted.
    Without it the launcher copies the lengths to the host once (a sync that stalls the GPU for the
    launch overhead) to size the grid and check them against q and the page table.
    """
    check_extend_inputs(q, k_cache, v_cache, page_table, prefix_lens, extend_lens, sm_scale)
    check_triton_device("q", q)
    check_triton_head_dim(q)
    if max_extend_len is not None:
        if isinstance(max_extend_len, bool) or not isinstance(max_extend_len, int) or max_extend_len < 0:
            raise ValueError(f"max_extend_len must be an int >= 0, got {max_extend_len!r}")
        return launch(
            q, k_cache, v_cache, page_table, prefix_lens, extend_lens, float(sm_scale),
            min(max_extend_len, q.shape[0]), default_config(q.device, q.shape[-1]),
        )
    prefixes, extends = torch.stack([prefix_lens, extend_lens]).cpu().tolist()
    check_extend_lengths(
        q, page_table, k_cache.shape[1], sum(extends),
        max((p + e for p, e in zip(prefixes, extends)), default=0),
        min(prefixes + extends, default=0),
    )
    max_extend = max(extends, default=0)
    return launch(
        q, k_cache, v_cache, page_table, prefix_lens, extend_lens, float(sm_scale), max_extend,
        default_config(q.device, q.shape[-1]),
    )
