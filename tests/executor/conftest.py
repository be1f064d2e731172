"""Fixtures of every executor test: one torch thread, the tiny model's config, engine settings.

(The triton interpreter switch for machines without CUDA is set once, in tests/conftest.py.)
"""

from __future__ import annotations

import pytest
import torch

from executor.engine import EngineConfig, ModelConfig


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The test models are tiny and engines share the process with worker threads: one
    intra-op thread avoids OpenMP spin-waits that made them ~20x slower on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def model_config() -> ModelConfig:
    """2 layers, hidden 64, 4 q heads over 2 kv heads of dim 16, byte vocabulary."""
    return ModelConfig(
        num_layers=2, hidden_size=64, num_q_heads=4, num_kv_heads=2, head_dim=16, intermediate_size=128
    )


@pytest.fixture
def engine_config() -> EngineConfig:
    """The torch backend, blocks of 4 tokens, 256 blocks per engine (a test needing more overrides it)."""
    return EngineConfig(backend="torch", block_size=4, num_blocks=256)
