"""Single-instance inference engine: a small Llama model, paged KV, radix prefix cache.

Public entry points are re-exported lazily, so importing a policy module
(`executor.engine.block_pool`, `.radix_cache`, `.kv_manager`, `.scheduler`,
`.request`) never imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Engine": "engine",
    "PrefillResult": "engine",
    "ExtendResult": "engine",
    "PrefixMissingError": "engine",
    "EngineConfig": "config",
    "ModelConfig": "config",
    "ByteTokenizer": "tokenizer",
    "KVPayload": "kv_payload",
    "KVPayloadError": "kv_payload",
    "Request": "request",
    "RequestStatus": "request",
    "SamplingParams": "request",
    "BatchKind": "scheduler",
    "OutOfBlocksError": "block_pool",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"executor.engine.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'executor.engine' has no attribute {name!r}")
