"""Attention, norm and RoPE kernels for the executor: Triton kernels beside plain-torch references.

Entry points: ``get_ops(backend)`` ("torch" | "triton") and the ``reference`` module. Importing this
package never imports triton; the Triton modules load on ``get_ops("triton")``.
"""

from placer_kernels import reference
from placer_kernels.ops import BACKENDS, KernelOps, get_ops

__all__ = ["BACKENDS", "KernelOps", "get_ops", "reference"]
