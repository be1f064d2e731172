"""executor: serves a plan — the inference engine, the PDD roles (P, RLD, MD), channels, router, deployment.

Entry points are re-exported lazily, so `import executor` stays cheap and
torch-free until an engine class (or a cluster) is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_ENGINE = (
    "Engine", "EngineConfig", "ModelConfig", "SamplingParams", "KVPayload", "KVPayloadError",
    "PrefillResult", "ExtendResult", "PrefixMissingError", "OutOfBlocksError", "ByteTokenizer",
)
_SERVING = {
    "LocalCluster": "executor.cluster",
    "Router": "executor.router",
    "InstanceInfo": "executor.registry",
    "ServingConfig": "executor.config",
    "RoutingPolicy": "executor.routing",
    "Pipeline": "executor.routing",
    "HandoffPolicy": "executor.handoff",
    "RequestRecord": "placer.records",
    "BatchingRequestLog": "executor.request_log",
    "RayDeployment": "executor.deploy",
    "create_app": "executor.server",
}

__all__ = list(_ENGINE) + list(_SERVING)  # noqa: PLE0604 - names, built from the tables above


def __getattr__(name: str) -> Any:
    if name in _ENGINE:
        from executor import engine

        return getattr(engine, name)
    if name in _SERVING:
        return getattr(importlib.import_module(_SERVING[name]), name)
    raise AttributeError(f"module 'executor' has no attribute {name!r}")
