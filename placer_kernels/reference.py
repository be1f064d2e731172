"""Plain-torch reference kernels: the ground truth for the Triton kernels and the CPU fallback.

Every function here computes in fp32 and returns its result in the input's dtype. They are
written for clarity, not speed (attention loops over the batch and syncs with the host).

Paged KV cache, per layer: ``k_cache``/``v_cache`` are ``[num_blocks, block_size, num_kv_heads,
head_dim]``; ``page_table[b, j]`` (int32) is the block holding tokens ``j*block_size ..
(j+1)*block_size-1`` of sequence ``b``. Grouped-query attention: q head ``h`` reads kv head
``h // (num_q_heads // num_kv_heads)``.

The ``check_*`` helpers validate the arguments of each op (shapes, dtypes, devices, layout) and
raise ``ValueError`` naming the offending argument and its shape; the Triton launchers share
them, so both backends reject the same inputs with the same message.
"""

from __future__ import annotations

import math
import os

import torch
from torch import Tensor

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
INDEX_DTYPE = torch.int32

__all__ = [
    "decode_attention",
    "extend_attention",
    "prefill_attention",
    "rms_norm",
    "apply_rope",
    "rope_inv_freq",
]


# --------------------------------------------------------------------------- validation


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _check_tensor(name: str, t: object, ndim: int, layout: str) -> None:
    if not isinstance(t, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor {layout}, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must be {layout}, got shape {_shape(t)}")


def _check_float(name: str, t: Tensor) -> None:
    if t.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"{name} must be float16, bfloat16 or float32, got {t.dtype} (shape {_shape(t)})"
        )


def _check_index(name: str, t: Tensor) -> None:
    if t.dtype != INDEX_DTYPE:
        raise ValueError(f"{name} must be int32, got {t.dtype} (shape {_shape(t)})")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got strides {t.stride()} (shape {_shape(t)})")


def _check_inner_contiguous(name: str, t: Tensor) -> None:
    if t.numel() > 0 and t.stride(-1) != 1:
        raise ValueError(
            f"{name} must be contiguous in its last dim, got strides {t.stride()} (shape {_shape(t)})"
        )


def _check_same_device(ref_name: str, ref: Tensor, **others: Tensor) -> None:
    for name, t in others.items():
        if t.device != ref.device:
            raise ValueError(
                f"{name} is on {t.device} but {ref_name} is on {ref.device} (shape {_shape(t)})"
            )


def _check_scale(sm_scale: object) -> None:
    if not isinstance(sm_scale, (int, float)) or not math.isfinite(sm_scale) or sm_scale <= 0:
        raise ValueError(f"sm_scale must be a finite positive float, got {sm_scale!r}")


def _check_gqa(q_name: str, num_q_heads: int, kv_name: str, num_kv_heads: int) -> None:
    if num_kv_heads == 0 or num_q_heads % num_kv_heads != 0:
        raise ValueError(
            f"{q_name} has {num_q_heads} heads, not a multiple of the {num_kv_heads} heads of {kv_name}"
        )


def _check_paged_cache(q: Tensor, k_cache: Tensor, v_cache: Tensor, page_table: Tensor) -> None:
    layout = "[num_blocks, block_size, num_kv_heads, head_dim]"
    _check_tensor("k_cache", k_cache, 4, layout)
    _check_tensor("v_cache", v_cache, 4, layout)
    _check_tensor("page_table", page_table, 2, "[batch, max_blocks_per_seq]")
    _check_float("k_cache", k_cache)
    if k_cache.shape != v_cache.shape:
        raise ValueError(
            f"v_cache shape {_shape(v_cache)} differs from k_cache shape {_shape(k_cache)}"
        )
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name} dtype {t.dtype} differs from q dtype {q.dtype}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got strides {t.stride()} (shape {_shape(t)})")
    if k_cache.shape[3] != q.shape[-1]:
        raise ValueError(
            f"k_cache head_dim {k_cache.shape[3]} differs from q head_dim {q.shape[-1]} "
            f"(k_cache shape {_shape(k_cache)}, q shape {_shape(q)})"
        )
    _check_gqa("q", q.shape[1], "k_cache", k_cache.shape[2])
    _check_index("page_table", page_table)


def check_decode_inputs(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, page_table: Tensor, seq_lens: Tensor, sm_scale: float
) -> None:
    """Validate decode-attention arguments; raise ValueError naming the bad one."""
    _check_tensor("q", q, 3, "[batch, num_q_heads, head_dim]")
    _check_float("q", q)
    _check_inner_contiguous("q", q)
    _check_paged_cache(q, k_cache, v_cache, page_table)
    _check_tensor("seq_lens", seq_lens, 1, "[batch]")
    _check_index("seq_lens", seq_lens)
    batch = q.shape[0]
    if page_table.shape[0] != batch or seq_lens.shape[0] != batch:
        raise ValueError(
            f"batch mismatch: q {_shape(q)}, page_table {_shape(page_table)}, seq_lens {_shape(seq_lens)}"
        )
    _check_same_device("q", q, k_cache=k_cache, v_cache=v_cache, page_table=page_table, seq_lens=seq_lens)
    _check_scale(sm_scale)


def check_extend_inputs(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    page_table: Tensor,
    prefix_lens: Tensor,
    extend_lens: Tensor,
    sm_scale: float,
) -> None:
    """Validate extend-attention arguments (host-side only; no device sync)."""
    _check_tensor("q", q, 3, "[total_new_tokens, num_q_heads, head_dim]")
    _check_float("q", q)
    _check_inner_contiguous("q", q)
    _check_paged_cache(q, k_cache, v_cache, page_table)
    _check_tensor("prefix_lens", prefix_lens, 1, "[batch]")
    _check_tensor("extend_lens", extend_lens, 1, "[batch]")
    _check_index("prefix_lens", prefix_lens)
    _check_index("extend_lens", extend_lens)
    batch = page_table.shape[0]
    if prefix_lens.shape[0] != batch or extend_lens.shape[0] != batch:
        raise ValueError(
            f"batch mismatch: page_table {_shape(page_table)}, prefix_lens {_shape(prefix_lens)}, "
            f"extend_lens {_shape(extend_lens)}"
        )
    _check_same_device(
        "q", q, k_cache=k_cache, v_cache=v_cache, page_table=page_table,
        prefix_lens=prefix_lens, extend_lens=extend_lens,
    )
    _check_scale(sm_scale)


def check_extend_lengths(
    q: Tensor, page_table: Tensor, block_size: int, total: int, max_total_len: int, min_len: int
) -> None:
    """Check the synced length statistics of an extend batch against q and the page table."""
    if total != q.shape[0]:
        raise ValueError(
            f"extend_lens sum to {total} but q has {q.shape[0]} rows (q shape {_shape(q)})"
        )
    if min_len < 0:
        raise ValueError(f"prefix_lens and extend_lens must be >= 0, got a minimum of {min_len}")
    capacity = page_table.shape[1] * block_size
    if max_total_len > capacity:
        raise ValueError(
            f"a sequence needs {max_total_len} cache slots but page_table {_shape(page_table)} "
            f"with block_size {block_size} holds {capacity}"
        )


def check_prefill_inputs(q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, sm_scale: float) -> None:
    """Validate prefill-attention arguments (host-side only; no device sync)."""
    _check_tensor("q", q, 3, "[total_tokens, num_q_heads, head_dim]")
    _check_tensor("k", k, 3, "[total_tokens, num_kv_heads, head_dim]")
    _check_tensor("v", v, 3, "[total_tokens, num_kv_heads, head_dim]")
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_float(name, t)
        _check_inner_contiguous(name, t)
    if k.shape != v.shape:
        raise ValueError(f"v shape {_shape(v)} differs from k shape {_shape(k)}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name} dtype {t.dtype} differs from q dtype {q.dtype}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(
            f"k shape {_shape(k)} does not match q shape {_shape(q)} in tokens or head_dim"
        )
    _check_gqa("q", q.shape[1], "k", k.shape[1])
    _check_tensor("cu_seqlens", cu_seqlens, 1, "[batch + 1]")
    _check_index("cu_seqlens", cu_seqlens)
    if cu_seqlens.shape[0] < 1:
        raise ValueError(f"cu_seqlens must hold at least one entry, got shape {_shape(cu_seqlens)}")
    _check_same_device("q", q, k=k, v=v, cu_seqlens=cu_seqlens)
    _check_scale(sm_scale)


def check_prefill_lengths(q: Tensor, first: int, last: int, min_len: int) -> None:
    """Check the synced statistics of cu_seqlens against q."""
    if first != 0 or last != q.shape[0] or min_len < 0:
        raise ValueError(
            f"cu_seqlens must start at 0, be non-decreasing and end at {q.shape[0]} (q rows); "
            f"got first={first}, last={last}, smallest step={min_len}"
        )


def check_rms_norm_inputs(x: Tensor, weight: Tensor, eps: float) -> None:
    """Validate rms_norm arguments."""
    if not isinstance(x, Tensor) or x.dim() < 1:
        raise ValueError(f"x must be a tensor [..., hidden], got {getattr(x, 'shape', type(x).__name__)}")
    _check_float("x", x)
    _check_tensor("weight", weight, 1, "[hidden]")
    _check_float("weight", weight)
    if weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"weight shape {_shape(weight)} does not match x hidden size {x.shape[-1]} (x shape {_shape(x)})"
        )
    if not weight.is_contiguous():
        raise ValueError(f"weight must be contiguous, got strides {weight.stride()}")
    _check_inner_contiguous("x", x)
    _check_same_device("x", x, weight=weight)
    if not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite float >= 0, got {eps!r}")


def check_rope_inputs(q: Tensor, k: Tensor, positions: Tensor, theta: float) -> None:
    """Validate apply_rope arguments."""
    _check_tensor("q", q, 3, "[tokens, num_q_heads, head_dim]")
    _check_tensor("k", k, 3, "[tokens, num_kv_heads, head_dim]")
    _check_float("q", q)
    _check_float("k", k)
    _check_inner_contiguous("q", q)
    _check_inner_contiguous("k", k)
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(f"k shape {_shape(k)} does not match q shape {_shape(q)} in tokens or head_dim")
    if q.shape[2] % 2 != 0:
        raise ValueError(f"head_dim must be even for rotate-half RoPE, got q shape {_shape(q)}")
    _check_tensor("positions", positions, 1, "[tokens]")
    if positions.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"positions must be int32 or int64, got {positions.dtype}")
    if positions.shape[0] != q.shape[0]:
        raise ValueError(f"positions shape {_shape(positions)} does not match q tokens {q.shape[0]}")
    if not positions.is_contiguous():
        raise ValueError(f"positions must be contiguous, got strides {positions.stride()}")
    _check_same_device("q", q, k=k, positions=positions)
    if not isinstance(theta, (int, float)) or not math.isfinite(theta) or theta <= 1:
        raise ValueError(f"theta must be a finite float > 1, got {theta!r}")


def check_triton_device(name: str, t: Tensor) -> None:
    """Triton kernels run on a GPU, or on the CPU only under TRITON_INTERPRET=1."""
    if t.device.type == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise ValueError(
            f"{name} is on the cpu: the triton backend needs a GPU tensor (or TRITON_INTERPRET=1); "
            f"use get_ops('torch') on the cpu"
        )


def check_triton_head_dim(q: Tensor) -> None:
    """The Triton attention kernels tile head_dim whole: a power of two in 16..256."""
    head_dim = q.shape[-1]
    if head_dim < 16 or head_dim > 256 or head_dim & (head_dim - 1):
        raise ValueError(
            f"the triton attention kernels need head_dim a power of two in 16..256, "
            f"got q shape {_shape(q)}"
        )


# --------------------------------------------------------------------------- attention


def _check_length_hint(name: str, hint: int | None, actual: int) -> None:
    if hint is not None and (isinstance(hint, bool) or not isinstance(hint, int) or hint < actual):
        raise ValueError(f"{name} must be an int >= the longest sequence ({actual}), got {hint!r}")


def _gather_tokens(cache: Tensor, page_row: Tensor, num_tokens: int) -> Tensor:
    """Tokens 0..num_tokens-1 of one sequence from a paged cache, as [num_tokens, H, D]."""
    block_size = cache.shape[1]
    num_blocks = -(-num_tokens // block_size)
    # index_select, not cache[rows]: one copy either way, but advanced indexing went 3x slower on
    # the CPU and 9x at its 90th percentile for a 1536-token sequence (2026-12-03)
    blocks = cache.index_select(0, page_row[:num_blocks].long())  # [n, block_size, H, D]
    return blocks.reshape(-1, cache.shape[2], cache.shape[3])[:num_tokens]


def _attend(q: Tensor, k: Tensor, v: Tensor, sm_scale: float, first_query_pos: int | None) -> Tensor:
    """softmax(q k^T * scale) v in fp32 for one sequence.

    q [M, Hq, D], k/v [N, Hkv, D]. When ``first_query_pos`` is given, query i sits at absolute
    position first_query_pos + i and sees keys 0..first_query_pos + i (causal). Query head h reads
    KV head h // (Hq / Hkv): the queries are grouped by their KV head, so K and V are read in place
    (no copy repeated per query head: a decode step is bound by its memory traffic).
    """
    m, hq, d = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    qg = q.float().reshape(m, hkv, group, d).permute(1, 0, 2, 3).reshape(hkv, m * group, d)  # row = i·group + g
    scores = torch.bmm(qg, k.float().permute(1, 2, 0)) * sm_scale  # [Hkv, M·group, N]
    if first_query_pos is not None:
        q_pos = (first_query_pos + torch.arange(m, device=q.device)).repeat_interleave(group)
        k_pos = torch.arange(k.shape[0], device=q.device)
        scores = scores.masked_fill(k_pos[None, None, :] > q_pos[None, :, None], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.bmm(probs, v.float().permute(1, 0, 2))  # [Hkv, M·group, D]
    return out.reshape(hkv, m, group, d).permute(1, 0, 2, 3).reshape(m, hq, d)


def decode_attention(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    page_table: Tensor,
    seq_lens: Tensor,
    sm_scale: float,
    num_splits: int | None = None,
) -> Tensor:
    """One new token per sequence attends to all of its cached tokens.

    q [B, Hq, D]; seq_lens int32 [B] counts the cached tokens including the current one (>= 1).
    out[b, h] = softmax(q[b, h] . K_b^T * sm_scale) V_b over tokens 0..seq_lens[b]-1.
    ``num_splits`` is accepted for parity with the Triton kernel and does not change the result.
    """
    check_decode_inputs(q, k_cache, v_cache, page_table, seq_lens, sm_scale)
    capacity = page_table.shape[1] * k_cache.shape[1]
    out = torch.empty_like(q)
    for b, seq_len in enumerate(seq_lens.tolist()):
        if not 1 <= seq_len <= capacity:
            raise ValueError(f"seq_lens[{b}] = {seq_len} is outside 1..{capacity} (page_table capacity)")
        k = _gather_tokens(k_cache, page_table[b], seq_len)
        v = _gather_tokens(v_cache, page_table[b], seq_len)
        out[b] = _attend(q[b : b + 1], k, v, sm_scale, None)[0].to(q.dtype)
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
    """New tokens of several sequences attend causally to their cached prefix and to each other.

    q [T, Hq, D] packs the new tokens back to back (sequence b owns extend_lens[b] rows). Their K/V
    are already in the cache at positions prefix_lens[b] .. prefix_lens[b]+extend_lens[b]-1; new
    token i of sequence b sees cache positions 0..prefix_lens[b]+i. out [T, Hq, D].
    ``max_extend_len``, the Triton kernel's sync-free grid hint, is checked here, not needed.
    """
    check_extend_inputs(q, k_cache, v_cache, page_table, prefix_lens, extend_lens, sm_scale)
    prefixes, extends = prefix_lens.tolist(), extend_lens.tolist()
    block_size = k_cache.shape[1]
    check_extend_lengths(
        q, page_table, block_size, sum(extends),
        max((p + e for p, e in zip(prefixes, extends)), default=0),
        min(prefixes + extends, default=0),
    )
    _check_length_hint("max_extend_len", max_extend_len, max(extends, default=0))
    out = torch.empty_like(q)
    start = 0
    for b, (prefix, extend) in enumerate(zip(prefixes, extends)):
        if extend == 0:
            continue
        k = _gather_tokens(k_cache, page_table[b], prefix + extend)
        v = _gather_tokens(v_cache, page_table[b], prefix + extend)
        rows = slice(start, start + extend)
        out[rows] = _attend(q[rows], k, v, sm_scale, prefix).to(q.dtype)
        start += extend
    return out


def prefill_attention(
    q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, sm_scale: float, max_seq_len: int | None = None
) -> Tensor:
    """Causal attention within each of several packed sequences (variable length).

    q [T, Hq, D], k/v [T, Hkv, D]; sequence b owns rows cu_seqlens[b] .. cu_seqlens[b+1]-1.
    out [T, Hq, D]. ``max_seq_len``, the Triton kernel's sync-free grid hint, is checked here.
    """
    check_prefill_inputs(q, k, v, cu_seqlens, sm_scale)
    bounds = cu_seqlens.tolist()
    steps = [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])]
    check_prefill_lengths(q, bounds[0], bounds[-1], min(steps, default=0))
    _check_length_hint("max_seq_len", max_seq_len, max(steps, default=0))
    out = torch.empty_like(q)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi > lo:
            out[lo:hi] = _attend(q[lo:hi], k[lo:hi], v[lo:hi], sm_scale, 0).to(q.dtype)
    return out


# --------------------------------------------------------------------------- norm and rope


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """out = x / sqrt(mean(x^2, -1) + eps) * weight, in fp32, returned in x.dtype. x [..., H]."""
    check_rms_norm_inputs(x, weight, eps)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)


def rope_inv_freq(head_dim: int, theta: float, device: torch.device | str) -> Tensor:
    """inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2, fp32 (computed in fp64 on the host)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return (1.0 / (float(theta) ** exponents)).to(torch.float32).to(device)


def _rotate_half(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def apply_rope(q: Tensor, k: Tensor, positions: Tensor, theta: float) -> tuple[Tensor, Tensor]:
    """Rotary position embedding, rotate-half (Llama/NeoX) style; returns new (q, k).

    For token t at position p and pair i < D/2 (angle a = p * theta^(-2i/D)):
    out[i] = x[i] cos a - x[i + D/2] sin a;  out[i + D/2] = x[i + D/2] cos a + x[i] sin a.
    """
    check_rope_inputs(q, k, positions, theta)
    inv_freq = rope_inv_freq(q.shape[-1], theta, q.device)
    angles = positions.float()[:, None] * inv_freq[None, :]  # [T, D/2]
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
    return _rotate_half(q, cos, sin), _rotate_half(k, cos, sin)
