"""executor: serves a plan — the inference engine the PDD roles (P, RLD, MD) are built on.

Entry points are re-exported lazily from `executor.engine`, so `import executor`
stays cheap and torch-free until an engine class is used.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = (
    "Engine", "EngineConfig", "ModelConfig", "SamplingParams", "KVPayload", "KVPayloadError",
    "PrefillResult", "ExtendResult", "PrefixMissingError", "OutOfBlocksError", "ByteTokenizer",
)

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        from executor import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'executor' has no attribute {name!r}")
