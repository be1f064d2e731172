"""Fixtures of the engine tests: engines on a device, seeds, a prompt."""

from __future__ import annotations

import pytest

from executor.engine import Engine, EngineConfig, ModelConfig


@pytest.fixture
def device() -> str:
    """Engine tests run on the CPU with the torch backend (the triton test picks its own)."""
    return "cpu"


@pytest.fixture
def seed() -> int:
    return 0


@pytest.fixture
def make_engine(model_config, device, seed):
    """Factory: `make_engine(**engine_config_overrides)` → a fresh engine with the same weights."""

    def make(*, model: ModelConfig | None = None, backend: str = "torch", dev: str | None = None, **kw) -> Engine:
        kw.setdefault("block_size", 4)
        kw.setdefault("num_blocks", 64)
        return Engine.from_seed(
            model or model_config, EngineConfig(backend=backend, **kw), seed=seed, device=dev or device
        )

    return make


@pytest.fixture
def prompt() -> list[int]:
    """A 23-token prompt (BOS + bytes): not a multiple of the block size."""
    return [256, *b"the quick brown fox ju"]


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory):
    """{family: directory} of tiny random Llama-3 / Qwen2 / Qwen3 checkpoints (built once, locally)."""
    from tests.executor.engine.hf_support import tiny_checkpoints

    return tiny_checkpoints(tmp_path_factory)
