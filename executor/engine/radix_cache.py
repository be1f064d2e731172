"""Radix prefix cache over token ids, at KV-block granularity.

In: token id sequences and the block ids that hold their KV. Out: for a new
sequence, the longest block-aligned cached prefix (`PrefixMatch`), and blocks handed
back to the `BlockPool` on eviction.

Shape: a tree whose every edge is one full block of `block_size` token ids; a node
holds the block id with that block's KV (so a path from the root spells a prefix and
lists its blocks). Partial blocks are never cached.

Ownership: the cache owns one pool reference per node. `lock(handle)` pins the path
from a node to the root (a running request reads those blocks); `unlock(handle)`
undoes exactly one `lock`. `evict(n)` removes least-recently-used *unlocked leaves*
until `n` blocks went back to the pool, so a locked block is never evicted; once the
last lock is gone, eviction can empty the tree and free every block.

No torch here (policy code). Time is a logical clock, so eviction order is
deterministic.

`RadixCache` is a `placer.prefix.PrefixCache` whose block keys are the blocks' token
ids (`block_keys`): `match_blocks` / `insert_blocks` are `match` / `insert` over keys.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from executor.engine.block_pool import BlockPool


@dataclass(eq=False)
class _Node:
    key: Hashable  # the block's token ids (`RadixCache.block_keys`)
    block_id: int
    parent: _Node | None
    children: dict[Hashable, _Node] = field(default_factory=dict)
    lock_ref: int = 0  # locks on this node or any descendant
    last_access: int = 0
    evicted: bool = False


@dataclass(frozen=True, eq=False)
class PrefixHandle:
    """Opaque reference to a cached prefix (a tree node), for `lock` / `unlock`."""

    _node: _Node

    @property
    def num_blocks(self) -> int:
        """How many blocks the prefix behind this handle spans."""
        n, node = 0, self._node
        while node.parent is not None:
            n, node = n + 1, node.parent
        return n


@dataclass(frozen=True)
class PrefixMatch:
    """Result of `RadixCache.match`: the longest cached block-aligned prefix."""

    num_tokens: int
    block_ids: tuple[int, ...]
    handle: PrefixHandle


@dataclass(frozen=True)
class InsertResult:
    """Result of `RadixCache.insert`.

    `block_ids` are the cache's blocks for the inserted prefix: a caller's block is
    adopted where the prefix was new, the existing one is kept where it was cached
    already (`num_new_blocks` counts the adopted ones).
    """

    num_tokens: int
    block_ids: tuple[int, ...]
    num_new_blocks: int
    handle: PrefixHandle


class RadixCache:
    """Block-granular prefix tree over token ids; see the module docstring."""

    def __init__(self, pool: BlockPool, block_size: int) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.pool = pool
        self.block_size = block_size
        self._root = _Node(key=(), block_id=-1, parent=None)
        self._clock = 0
        self._num_nodes = 0

    # ---- queries -------------------------------------------------------------------

    @property
    def num_blocks(self) -> int:
        """Blocks held by the cache (one per node)."""
        return self._num_nodes

    @property
    def num_evictable_blocks(self) -> int:
        """Blocks not pinned by any lock (every one of them can be evicted)."""
        return sum(1 for n in self._nodes() if n.lock_ref == 0)

    def cached_block_ids(self) -> set[int]:
        """Every block id the cache holds."""
        return {n.block_id for n in self._nodes()}

    @property
    def block_tokens(self) -> int:
        """Tokens per block (`block_size`)."""
        return self.block_size

    def block_keys(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        """The keys of `tokens`' whole blocks: each block's token ids (a partial last block has none)."""
        bs = self.block_size
        return [tuple(tokens[i : i + bs]) for i in range(0, len(tokens) - bs + 1, bs)]

    def match(self, tokens: Sequence[int]) -> PrefixMatch:
        """Longest cached prefix of `tokens` made of whole blocks; marks it as used."""
        return self._match(self.block_keys(tokens))

    def match_blocks(self, keys: Sequence[Hashable]) -> int:
        """How many leading blocks of `keys` (`block_keys`) are cached; marks them as used."""
        return len(self._match(keys).block_ids)

    def _match(self, keys: Sequence[Hashable]) -> PrefixMatch:
        self._clock += 1
        node, blocks = self._root, []
        for key in keys:
            child = node.children.get(key)
            if child is None:
                break
            child.last_access = self._clock
            blocks.append(child.block_id)
            node = child
        return PrefixMatch(len(blocks) * self.block_size, tuple(blocks), PrefixHandle(node))

    # ---- updates -------------------------------------------------------------------

    def insert(self, tokens: Sequence[int], block_ids: Sequence[int]) -> InsertResult:
        """Cache the whole blocks of `tokens`, whose KV is in `block_ids` (in order).

        Only `min(len(tokens) // block_size, len(block_ids))` blocks are considered.
        The cache takes its own pool reference on each block it adopts; the caller
        keeps its references and drops them when it is done.
        """
        return self._insert(self.block_keys(tokens), block_ids)

    def insert_blocks(self, keys: Sequence[Hashable], block_ids: Sequence[int] | None = None) -> None:
        """`insert` over block keys (`block_keys`); the KV's `block_ids` are required here."""
        if block_ids is None:
            raise TypeError("RadixCache holds KV: insert_blocks needs the blocks' ids")
        self._insert(keys, block_ids)

    def _insert(self, keys: Sequence[Hashable], block_ids: Sequence[int]) -> InsertResult:
        self._clock += 1
        node, cached, adopted = self._root, [], 0
        for key, block_id in zip(keys, block_ids):
            child = node.children.get(key)
            if child is None:
                self.pool.incref([block_id])
                child = _Node(key=key, block_id=block_id, parent=node)
                node.children[key] = child
                self._num_nodes += 1
                adopted += 1
            child.last_access = self._clock
            cached.append(child.block_id)
            node = child
        return InsertResult(
            len(cached) * self.block_size, tuple(cached), adopted, PrefixHandle(node)
        )

    def lock(self, handle: PrefixHandle) -> None:
        """Pin the prefix behind `handle` (and all its ancestors) against eviction."""
        node = handle._node
        if node.evicted:
            raise ValueError("cannot lock an evicted prefix (lock right after match/insert)")
        while node.parent is not None:
            node.lock_ref += 1
            node = node.parent

    def unlock(self, handle: PrefixHandle) -> None:
        """Undo one `lock(handle)`."""
        node = handle._node
        if node.parent is not None and node.lock_ref <= 0:
            raise ValueError("unlock without a matching lock")
        while node.parent is not None:
            node.lock_ref -= 1
            node = node.parent

    def evict(self, num_blocks: int) -> int:
        """Remove LRU unlocked leaves until `num_blocks` blocks went back to the pool.

        Returns the number of blocks actually freed (fewer when too little is
        unlocked). A leaf whose block someone else still references leaves the tree
        but does not count as freed.
        """
        freed = 0
        heap = [(n.last_access, id(n), n) for n in self._nodes() if self._evictable(n)]
        heapq.heapify(heap)
        while freed < num_blocks and heap:
            _, _, node = heapq.heappop(heap)
            parent = node.parent
            assert parent is not None  # the root is never on the heap
            del parent.children[node.key]
            node.evicted = True
            self._num_nodes -= 1
            freed += self.pool.decref([node.block_id])
            if parent is not self._root and self._evictable(parent):
                heapq.heappush(heap, (parent.last_access, id(parent), parent))
        return freed

    # ---- internals -----------------------------------------------------------------

    @staticmethod
    def _evictable(node: _Node) -> bool:
        return not node.children and node.lock_ref == 0

    def _nodes(self) -> list[_Node]:
        out, stack = [], list(self._root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out
