"""Fixtures for the engine tests: a tiny model, engines on a device, seeds.

Without CUDA the triton backend runs in Triton's interpreter; TRITON_INTERPRET must
be set before triton (or any module with a @triton.jit kernel) is imported, hence
here at collection time.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from executor.engine import Engine, EngineConfig, ModelConfig  # noqa: E402


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The test models are tiny and engines share the process with worker threads: one
    intra-op thread avoids OpenMP spin-waits that made them ~20x slower on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def device() -> str:
    """Engine tests run on the CPU with the torch backend (the triton test picks its own)."""
    return "cpu"


@pytest.fixture
def seed() -> int:
    return 0


@pytest.fixture
def model_config() -> ModelConfig:
    """2 layers, hidden 64, 4 q heads over 2 kv heads of dim 16, byte vocabulary."""
    return ModelConfig(
        num_layers=2, hidden_size=64, num_q_heads=4, num_kv_heads=2, head_dim=16, intermediate_size=128
    )


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
