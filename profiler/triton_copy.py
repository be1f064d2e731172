"""Triton streaming kernels for the memory-bandwidth probe: copy and triad.

Math: copy ``dst[i] = src[i]`` (reads n·elem, writes n·elem bytes); triad
``a[i] = b[i] + s·c[i]`` (reads 2·n·elem, writes n·elem). One program per ``BLOCK``
elements, 64-bit offsets, masked tail. Imported only when the profiler runs them.
"""

from __future__ import annotations

import triton
import triton.language as tl

#: (BLOCK, num_warps) variants tried; the fastest is reported.
VARIANTS = ((1024, 4), (4096, 8), (8192, 16))


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _triad_kernel(a_ptr, b_ptr, c_ptr, scalar, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(b_ptr + offs, mask=mask)
    c = tl.load(c_ptr + offs, mask=mask)
    tl.store(a_ptr + offs, b + scalar * c, mask=mask)


def _check(*tensors) -> int:
    n = tensors[0].numel()
    for t in tensors:
        if not t.is_contiguous() or t.numel() != n or t.dtype != tensors[0].dtype:
            raise ValueError(f"tensors must be contiguous, of one dtype and {n} elements; got {t.shape} {t.dtype}")
    return n


def copy(src, dst, block: int = 4096, num_warps: int = 8) -> None:
    """``dst[:] = src`` with the Triton kernel."""
    n = _check(src, dst)
    _copy_kernel[(triton.cdiv(n, block),)](src, dst, n, BLOCK=block, num_warps=num_warps)


def triad(a, b, c, scalar: float, block: int = 4096, num_warps: int = 8) -> None:
    """``a[:] = b + scalar * c`` with the Triton kernel."""
    n = _check(a, b, c)
    _triad_kernel[(triton.cdiv(n, block),)](a, b, c, float(scalar), n, BLOCK=block, num_warps=num_warps)
