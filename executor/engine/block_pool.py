"""Paged KV block pool: which block ids are free and who holds the others.

In: a number of blocks. Out: block ids (plain ints) and reference counts.

Bookkeeping only — the KV tensors themselves live in the model runner, indexed by
these ids. Ownership rule: every holder of a block (a running request, the radix
cache) owns exactly one reference; a block returns to the free list when its last
reference is dropped. No torch here, so the policy code is tested in milliseconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class OutOfBlocksError(RuntimeError):
    """The pool cannot hand out the blocks asked for (even after eviction, where tried)."""

    def __init__(self, requested_blocks: int, free_blocks: int) -> None:
        super().__init__(
            f"out of KV blocks: requested {requested_blocks}, only {free_blocks} free"
        )
        self.requested_blocks = requested_blocks
        self.free_blocks = free_blocks


class BlockPool:
    """A fixed set of `num_blocks` KV blocks with per-block reference counts.

    Invariant: a block is on the free list iff its reference count is 0.
    """

    def __init__(self, num_blocks: int) -> None:
        if num_blocks <= 0:
            raise ValueError(f"num_blocks must be positive, got {num_blocks}")
        self.num_blocks = num_blocks
        self._refcounts = [0] * num_blocks
        # FIFO reuse: a block freed long ago is handed out before one freed just now.
        self._free: deque[int] = deque(range(num_blocks))

    @property
    def num_free(self) -> int:
        """How many blocks can be allocated right now."""
        return len(self._free)

    @property
    def num_used(self) -> int:
        """How many blocks hold at least one reference."""
        return self.num_blocks - len(self._free)

    def refcount(self, block_id: int) -> int:
        """The number of holders of `block_id`."""
        self._check_id(block_id)
        return self._refcounts[block_id]

    def allocate(self, n: int) -> list[int]:
        """Take `n` free blocks, each with reference count 1; all or nothing."""
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of blocks: {n}")
        if n > len(self._free):
            raise OutOfBlocksError(n, len(self._free))
        ids = [self._free.popleft() for _ in range(n)]
        for b in ids:
            self._refcounts[b] = 1
        return ids

    def incref(self, block_ids: Iterable[int]) -> None:
        """Add one holder to each (already allocated) block."""
        for b in block_ids:
            self._check_id(b)
            if self._refcounts[b] == 0:
                raise ValueError(f"block {b} is free; allocate it before sharing it")
            self._refcounts[b] += 1

    def decref(self, block_ids: Iterable[int]) -> int:
        """Drop one holder from each block; returns how many blocks became free."""
        freed = 0
        for b in block_ids:
            self._check_id(b)
            if self._refcounts[b] == 0:
                raise ValueError(f"block {b} is already free (double free)")
            self._refcounts[b] -= 1
            if self._refcounts[b] == 0:
                self._free.append(b)
                freed += 1
        return freed

    def _check_id(self, block_id: int) -> None:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} outside the pool [0, {self.num_blocks})")
