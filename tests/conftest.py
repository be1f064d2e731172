"""Session-wide test setup.

Triton decides interpreter mode when a kernel module is first imported, and pytest may
import any test package first, so the switch is set here, before any of them: on a
machine without CUDA every Triton kernel runs under TRITON_INTERPRET=1 on the CPU.
"""

import os


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if not _has_cuda():
    os.environ.setdefault("TRITON_INTERPRET", "1")
