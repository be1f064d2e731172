"""RMSNorm in Triton: one program per row.

Math: out[r, :] = x[r, :] / sqrt(mean_j(x[r, j]^2) + eps) * weight, computed in fp32, stored in
x.dtype. x [..., H] (rows = prod of the leading dims), weight [H].

Bytes moved: read x and write out, 2 * rows * H * elem; weight H * elem_w (cached across rows).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from placer_kernels.reference import check_rms_norm_inputs, check_triton_device


@triton.jit
def _rms_norm_kernel(
    x_ptr, weight_ptr, out_ptr,
    stride_x, stride_out,
    n_cols, eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm over the last dim; same contract as ``placer_kernels.reference.rms_norm``."""
    check_rms_norm_inputs(x, weight, eps)
    check_triton_device("x", x)
    hidden = x.shape[-1]
    # reshape is a view whenever the leading dims can be flattened; else it copies once.
    x2 = x.reshape(-1, hidden)
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    rows = x2.shape[0]
    if rows == 0 or hidden == 0:
        return out.reshape(x.shape)
    block = triton.next_power_of_2(hidden)
    num_warps = min(16, max(1, block // 256))
    _rms_norm_kernel[(rows,)](
        x2, weight, out, x2.stride(0), out.stride(0), hidden, float(eps),
        BLOCK=block, num_warps=num_warps,
    )
    return out.reshape(x.shape)
