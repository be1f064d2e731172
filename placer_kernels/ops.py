"""Backend selection: ``get_ops("torch")`` or ``get_ops("triton")`` → the five kernel functions.

The torch backend is ``placer_kernels.reference`` (runs anywhere). The triton backend imports triton only
when asked for, so ``import placer_kernels`` works on machines without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

BACKENDS = ("torch", "triton")


@dataclass(frozen=True)
class KernelOps:
    """The kernel set of one backend; each function has the signature documented in reference.py."""

    backend: str
    decode_attention: Callable
    extend_attention: Callable
    prefill_attention: Callable
    rms_norm: Callable
    apply_rope: Callable


def get_ops(backend: str) -> KernelOps:
    """Return the kernels of ``backend`` ("torch" or "triton"); ValueError for anything else."""
    if backend == "torch":
        from placer_kernels import reference as mod

        return KernelOps(
            backend="torch",
            decode_attention=mod.decode_attention,
            extend_attention=mod.extend_attention,
            prefill_attention=mod.prefill_attention,
            rms_norm=mod.rms_norm,
            apply_rope=mod.apply_rope,
        )
    if backend == "triton":
        from placer_kernels.decode_attention import decode_attention
        from placer_kernels.extend_attention import extend_attention
        from placer_kernels.prefill_attention import prefill_attention
        from placer_kernels.rmsnorm import rms_norm
        from placer_kernels.rope import apply_rope

        return KernelOps(
            backend="triton",
            decode_attention=decode_attention,
            extend_attention=extend_attention,
            prefill_attention=prefill_attention,
            rms_norm=rms_norm,
            apply_rope=apply_rope,
        )
    raise ValueError(f"unknown kernel backend {backend!r}; known backends: {', '.join(BACKENDS)}")
