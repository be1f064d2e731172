"""Decode attention over a paged KV cache, split-K ("flash-decoding") in Triton.

Math: for each sequence b and q head h (kv head g = h // (Hq / Hkv)),
    out[b, h] = softmax(q[b, h] . K[b, :L_b, g]^T * sm_scale) V[b, :L_b, g],   L_b = seq_lens[b].

Work split: one program per (sequence, kv head, split). A program loads the q rows of all
Hq/Hkv heads that share its kv head (padded to BLOCK_H >= 16 rows so ``tl.dot`` runs on tensor
cores), walks its share of the context in tiles of BLOCK_N tokens (several pages per tile; the page
ids come from the page table), and keeps an online softmax. With one split it writes the output;
with S > 1 splits it writes a partial output and its log-sum-exp, and ``_decode_reduce_kernel``
merges the S partials of each (sequence, head).

Bytes moved (the floor; decode is memory bound):
    K and V:     2 * sum_b(L_b) * Hkv * D * elem_bytes    (each cached token read once)
    page table:  4 * sum_b(ceil(L_b / BLOCK_N) * BLOCK_N / page_size)  (one id per token, L1-hit)
    q, out:      2 * B * Hq * D * elem_bytes
    partials:    2 * B * Hq * S * (D + 1) * 4             (written once, read once; S > 1 only)
FLOPs: 4 * sum_b(L_b) * Hq * D (tensor cores do BLOCK_H/(Hq/Hkv) times that on padded rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor

from placer_kernels.reference import check_decode_inputs, check_triton_device, check_triton_head_dim

LOG2E = 1.4426950408889634
MAX_SPLITS = 64
MIN_TOKENS_PER_SPLIT = 256


@triton.jit
def mma(a, b, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """a @ b with an fp32 accumulator. UPCAST_DOT feeds fp32 copies of a and b instead: the Triton
    interpreter multiplies bf16 bit patterns in tl.dot (triton-lang/triton#11584). Products of
    bf16 values are exact in fp32, so the upcast matches the GPU's bf16 MMA.
    TODO(triton-lang/triton#11584): drop UPCAST_DOT once the interpreter converts bf16 dot operands.
    """
    if UPCAST_DOT:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        out = tl.dot(a, b, input_precision=DOT_PRECISION)
    return out


def dot_flags(q: Tensor) -> dict:
    """The DOT_PRECISION / UPCAST_DOT constexprs for inputs of q's dtype and device."""
    return {
        "DOT_PRECISION": "ieee" if q.dtype == torch.float32 else "tf32",
        "UPCAST_DOT": q.device.type == "cpu" and q.dtype == torch.bfloat16,
    }


@triton.jit
def _decode_split_kernel(
    q_ptr, k_ptr, v_ptr, page_table_ptr, seq_lens_ptr, out_ptr, mid_o_ptr, mid_lse_ptr,
    qk_scale,  # sm_scale * log2(e): the softmax runs in base 2
    num_splits,
    stride_qb, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_pt,
    stride_ob, stride_oh,
    stride_mb, stride_mh, stride_ms,
    GROUP: tl.constexpr,
    BLOCK_H: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SINGLE_SPLIT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST_DOT: tl.constexpr,
):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)

    seq_len = tl.load(seq_lens_ptr + b)
    # Splits cover whole tiles so only the last tile of the sequence is partial.
    tokens_per_split = tl.cdiv(tl.cdiv(seq_len, num_splits), BLOCK_N) * BLOCK_N
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, seq_len)

    offs_h = tl.arange(0, BLOCK_H)
    mask_h = offs_h < GROUP
    heads = kv_head * GROUP + offs_h
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(
        q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
        mask=mask_h[:, None], other=0.0,
    )

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    page_row = page_table_ptr + b.to(tl.int64) * stride_pt
    k_head = k_ptr + kv_head * stride_kh
    v_head = v_ptr + kv_head * stride_vh

    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask_n = offs_n < end
        page = tl.load(page_row + offs_n // PAGE_SIZE, mask=mask_n, other=0).to(tl.int64)
        slot = offs_n % PAGE_SIZE
        k = tl.load(
            k_head + (page * stride_kb + slot * stride_kt)[:, None] + offs_d[None, :],
            mask=mask_n[:, None], other=0.0,
        )
        qk = mma(q, tl.trans(k), DOT_PRECISION, UPCAST_DOT) * qk_scale
        qk = tl.where(mask_n[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            v_head + (page * stride_vb + slot * stride_vt)[:, None] + offs_d[None, :],
            mask=mask_n[:, None], other=0.0,
        )
        acc = acc * alpha[:, None] + mma(p.to(v.dtype), v, DOT_PRECISION, UPCAST_DOT)
        m_i = m_new

    if SINGLE_SPLIT:
        out = acc / l_i[:, None]
        tl.store(
            out_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
            out.to(out_ptr.dtype.element_ty), mask=mask_h[:, None],
        )
    else:
        # An empty split (past the end of a short sequence) has l == 0; the reduce skips it.
        valid = l_i > 0
        safe_l = tl.where(valid, l_i, 1.0)
        lse = tl.where(valid, m_i + tl.log2(safe_l), float("-inf"))
        mid = b.to(tl.int64) * stride_mb + heads * stride_mh + split * stride_ms
        tl.store(mid_o_ptr + mid[:, None] + offs_d[None, :], acc / safe_l[:, None], mask=mask_h[:, None])
        # mid_lse [B, Hq, S] has mid_o's [B, Hq, S, D] strides divided by D.
        tl.store(mid_lse_ptr + mid // HEAD_DIM, lse, mask=mask_h)


@triton.jit
def _decode_reduce_kernel(
    seq_lens_ptr, mid_o_ptr, mid_lse_ptr, out_ptr,
    num_splits,
    stride_mb, stride_mh, stride_ms,
    stride_ob, stride_oh,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    """out[b, h] = sum_s w_s o_s / sum_s w_s with w_s = 2^(lse_s - max lse) over non-empty splits."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + b)
    tokens_per_split = tl.cdiv(tl.cdiv(seq_len, num_splits), BLOCK_N) * BLOCK_N
    used_splits = tl.cdiv(seq_len, tokens_per_split)

    offs_s = tl.arange(0, BLOCK_S)
    mask_s = offs_s < used_splits
    offs_d = tl.arange(0, HEAD_DIM)
    base = b.to(tl.int64) * stride_mb + h * stride_mh + offs_s * stride_ms
    lse = tl.load(mid_lse_ptr + base // HEAD_DIM, mask=mask_s, other=float("-inf"))
    m = tl.max(lse, 0)
    w = tl.where(mask_s, tl.exp2(lse - m), 0.0)
    o = tl.load(mid_o_ptr + base[:, None] + offs_d[None, :], mask=mask_s[:, None], other=0.0)
    out = tl.sum(o * w[:, None], 0) / tl.sum(w, 0)
    tl.store(
        out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d,
        out.to(out_ptr.dtype.element_ty),
    )


@dataclass(frozen=True)
class DecodeConfig:
    """Tile and launch parameters of the split kernel."""

    block_n: int
    num_warps: int
    num_stages: int


def default_config(device: torch.device, head_dim: int) -> DecodeConfig:
    """Tiles measured on an H200 (bench/bench_kernels.py --sweep, bf16, D=128, B=32-64, 8-32K
    tokens, pages of 16 and 64): 64-token tiles, 4 warps, 3 stages with 2 splits reached 85-90 % of
    HBM bandwidth. 128-token tiles need twice the shared memory, fit fewer programs per SM and lost
    (73 % with 2 splits). Under the interpreter: small tiles, so the loops and tails run.
    """
    if device.type == "cpu":
        return DecodeConfig(block_n=16, num_warps=4, num_stages=1)
    return DecodeConfig(block_n=64, num_warps=4, num_stages=3)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def auto_num_splits(batch: int, num_kv_heads: int, max_context: int, device: torch.device) -> int:
    """About 4 programs per SM, no split shorter than MIN_TOKENS_PER_SPLIT, rounded down to a power
    of two (on an H200 at B=32, Hkv=8: 2 or 4 splits gave 84-90 % of HBM bandwidth, 3 gave 74-79 %).

    Uses the page table's capacity as the context bound, so it needs no device sync.
    """
    programs = max(1, batch * num_kv_heads)
    wanted = triton.cdiv(4 * _num_sms(device), programs)
    by_length = max(1, max_context // MIN_TOKENS_PER_SPLIT)
    splits = max(1, min(wanted, by_length, MAX_SPLITS))
    return 1 << (splits.bit_length() - 1)


def launch(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, page_table: Tensor, seq_lens: Tensor,
    sm_scale: float, num_splits: int, config: DecodeConfig,
) -> Tensor:
    """Run the kernels with explicit splits and tiles (inputs already validated)."""
    batch, num_q_heads, head_dim = q.shape
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = num_q_heads // num_kv_heads
    out = torch.empty_like(q)
    if batch == 0:
        return out
    block_h = max(16, triton.next_power_of_2(group))
    single = num_splits == 1
    if single:
        mid_o = mid_lse = out  # unused
        mid_strides = (0, 0, 0)
    else:
        mid_o = torch.empty(batch, num_q_heads, num_splits, head_dim, device=q.device, dtype=torch.float32)
        mid_lse = torch.empty(batch, num_q_heads, num_splits, device=q.device, dtype=torch.float32)
        mid_strides = mid_o.stride()[:3]
    _decode_split_kernel[(batch, num_kv_heads, num_splits)](
        q, k_cache, v_cache, page_table, seq_lens, out, mid_o, mid_lse,
        sm_scale * LOG2E, num_splits,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        page_table.stride(0),
        out.stride(0), out.stride(1),
        *mid_strides,
        GROUP=group, BLOCK_H=block_h, HEAD_DIM=head_dim, PAGE_SIZE=page_size,
        BLOCK_N=config.block_n, SINGLE_SPLIT=single, **dot_flags(q),
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
    if not single:
        _decode_reduce_kernel[(batch, num_q_heads)](
            seq_lens, mid_o, mid_lse, out, num_splits,
            *mid_strides, out.stride(0), out.stride(1),
            HEAD_DIM=head_dim, BLOCK_N=config.block_n,
            BLOCK_S=triton.next_power_of_2(num_splits), num_warps=4,
        )
    return out


def decode_attention(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    page_table: Tensor,
    seq_lens: Tensor,
    sm_scale: float,
    num_splits: int | None = None,
) -> Tensor:
    """Paged decode attention; same contract as ``placer_kernels.reference.decode_attention``.

    ``num_splits`` splits each sequence's context over that many programs (flash-decoding); None
    picks it from the batch size, the kv heads, the SM count and the page table's capacity. Every
    seq_lens[b] must be in 1..page_table.shape[1]*block_size (not checked: that would need a sync).
    """
    check_decode_inputs(q, k_cache, v_cache, page_table, seq_lens, sm_scale)
    check_triton_device("q", q)
    check_triton_head_dim(q)
    max_context = page_table.shape[1] * k_cache.shape[1]
    if num_splits is None:
        num_splits = auto_num_splits(q.shape[0], k_cache.shape[2], max_context, q.device)
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be an int in 1..{MAX_SPLITS}, got {num_splits!r}")
    return launch(
        q, k_cache, v_cache, page_table, seq_lens, float(sm_scale), num_splits,
        default_config(q.device, q.shape[-1]),
    )
