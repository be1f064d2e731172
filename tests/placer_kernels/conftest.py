"""Fixtures for the kernel tests: device, seeded random data, paged KV caches, tolerances.

Without a CUDA device the Triton kernels run in the Triton interpreter on the CPU; the variable
must be set before triton is imported, which happens when a test module imports a Triton kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# (atol, rtol) of a kernel against its fp32-math reference. bf16/fp16 kernels round the softmax
# weights to the input dtype before the PV product and round the output once.
TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (4e-3, 4e-3),
    torch.bfloat16: (3e-2, 2e-2),
}

POISON_KEY = 30.0  # scores this large swamp the softmax if a kernel reads past a sequence end
POISON_VALUE = 1e3


@pytest.fixture
def device() -> torch.device:
    """CUDA when present (compiled kernels), else the CPU (Triton interpreter)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture
def cuda_device() -> torch.device:
    """For @pytest.mark.gpu tests: skipped without CUDA."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return torch.device("cuda")


@pytest.fixture
def seed() -> int:
    return 20260714


@pytest.fixture
def gen(seed: int) -> torch.Generator:
    """CPU generator: data is drawn on the CPU and moved, so it is the same on every device."""
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def randn(gen: torch.Generator, device: torch.device):
    """randn(*shape, dtype=..., device=None) drawn from the seeded generator."""

    def draw(*shape: int, dtype: torch.dtype = torch.float32, device_: torch.device | None = None):
        return torch.randn(*shape, generator=gen).to(dtype=dtype, device=device_ or device)

    return draw


@pytest.fixture
def tol():
    """tol(dtype) -> dict(atol=..., rtol=...) for torch.testing.assert_close."""

    def lookup(dtype: torch.dtype) -> dict:
        atol, rtol = TOLERANCES[dtype]
        return {"atol": atol, "rtol": rtol}

    return lookup


@dataclass
class PagedKV:
    """A paged cache holding known per-sequence tokens, for checking page-table handling."""

    k_cache: torch.Tensor  # [num_blocks, block_size, Hkv, D]
    v_cache: torch.Tensor
    page_table: torch.Tensor  # int32 [B, max_blocks_per_seq]
    keys: list[torch.Tensor]  # per sequence [L_b, Hkv, D], the tokens in order
    values: list[torch.Tensor]


@pytest.fixture
def make_paged(gen: torch.Generator, device: torch.device):
    """make_paged(lens, num_kv_heads, head_dim, block_size, dtype) -> PagedKV.

    Blocks are handed out in a shuffled order (so page-table loads matter), the unused tail of each
    last block and every unused page-table entry point at poisoned slots, and the page table has a
    spare column, so a kernel that reads past a sequence's end gives a visibly wrong answer.
    """

    def build(lens, num_kv_heads, head_dim, block_size, dtype, device_=None) -> PagedKV:
        dev = device_ or device
        blocks_per_seq = [-(-n // block_size) for n in lens]
        num_blocks = sum(blocks_per_seq) + 2  # + a poison block + a never-referenced block
        order = torch.randperm(num_blocks, generator=gen)
        poison_block = int(order[-1])
        shape = (num_blocks, block_size, num_kv_heads, head_dim)
        k_cache = torch.full(shape, POISON_KEY)
        v_cache = torch.full(shape, POISON_VALUE)
        width = max(blocks_per_seq, default=0) + 1
        page_table = torch.full((len(lens), width), poison_block, dtype=torch.int32)
        keys, values = [], []
        next_block = 0
        for b, n in enumerate(lens):
            k = torch.randn(n, num_kv_heads, head_dim, generator=gen)
            v = torch.randn(n, num_kv_heads, head_dim, generator=gen)
            for j in range(blocks_per_seq[b]):
                block = int(order[next_block])
                next_block += 1
                page_table[b, j] = block
                lo, hi = j * block_size, min((j + 1) * block_size, n)
                k_cache[block, : hi - lo] = k[lo:hi]
                v_cache[block, : hi - lo] = v[lo:hi]
            keys.append(k.to(dtype=dtype, device=dev))
            values.append(v.to(dtype=dtype, device=dev))
        return PagedKV(
            k_cache=k_cache.to(dtype=dtype, device=dev),
            v_cache=v_cache.to(dtype=dtype, device=dev),
            page_table=page_table.to(dev),
            keys=keys,
            values=values,
        )

    return build


def int32(values, device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32, device=device)


@pytest.fixture
def as_int32(device: torch.device):
    """as_int32(list) -> int32 tensor on the test device."""
    return lambda values, device_=None: int32(values, device_ or device)
