"""Block manager: gives requests KV blocks, reusing cached prefixes.

In: requests (`Request`). Out: their `block_ids`, `num_kv_tokens` after a prefix hit,
and blocks returned to the radix cache when they leave.

Ownership: a RUNNING request holds one pool reference on every block in its
`block_ids` (shared prefix blocks included) and one lock on the deepest cached node
it matched. On `release` its whole blocks go into the radix cache (so the next
request with the same prefix reuses them), the lock is dropped and its references
are returned; blocks nobody else holds become free. Allocation evicts unlocked
cached blocks (LRU) before giving up with `OutOfBlocksError`. No torch here.
"""

from __future__ import annotations

from executor.engine.block_pool import BlockPool, OutOfBlocksError
from executor.engine.radix_cache import PrefixMatch, RadixCache
from executor.engine.request import Request


class BlockManager:
    """Pool + radix cache behind the few operations requests need."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_cache: bool = True):
        self.block_size = block_size
        self.pool = BlockPool(num_blocks)
        self.radix = RadixCache(self.pool, block_size)
        self.enable_prefix_cache = enable_prefix_cache

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks needed to hold KV for `num_tokens` positions."""
        return -(-num_tokens // self.block_size)

    @property
    def num_available(self) -> int:
        """Blocks that can be handed out now: free plus evictable cached ones."""
        return self.pool.num_free + self.radix.num_evictable_blocks

    def peek_prefix(self, tokens: list[int]) -> PrefixMatch | None:
        """The cached prefix `acquire_prefix` would reuse (None when caching is off)."""
        if not self.enable_prefix_cache:
            return None
        return self.radix.match(tokens)

    def acquire_prefix(self, req: Request, limit_tokens: int) -> int:
        """Give a block-less request the cached prefix of its first `limit_tokens`.

        Returns the number of reused tokens (0 when nothing matched or caching is off);
        sets `num_kv_tokens`, `num_cached_tokens`, `block_ids` and locks the prefix.
        """
        if req.block_ids:
            raise ValueError(f"request {req.request_id} already holds blocks")
        match = self.peek_prefix(req.token_ids[:limit_tokens])
        if match is None or match.num_tokens == 0:
            req.num_kv_tokens = req.num_cached_tokens = 0
            return 0
        self.radix.lock(match.handle)
        self.pool.incref(match.block_ids)
        req.prefix_handle = match.handle
        req.block_ids = list(match.block_ids)
        req.num_kv_tokens = req.num_cached_tokens = match.num_tokens
        return match.num_tokens

    def allocate(self, n: int) -> list[int]:
        """`n` fresh blocks, evicting unlocked cached ones if the free list is short."""
        short = n - self.pool.num_free
        if short > 0:
            self.radix.evict(short)
        if n > self.pool.num_free:
            raise OutOfBlocksError(n, self.pool.num_free)
        return self.pool.allocate(n)

    def can_grow(self, req: Request, num_tokens: int) -> bool:
        """Whether `grow(req, num_tokens)` would succeed."""
        return self.blocks_for(num_tokens) - len(req.block_ids) <= self.num_available

    def grow(self, req: Request, num_tokens: int) -> None:
        """Make `req.block_ids` cover `num_tokens` positions."""
        missing = self.blocks_for(num_tokens) - len(req.block_ids)
        if missing > 0:
            req.block_ids.extend(self.allocate(missing))

    def publish(self, req: Request) -> None:
        """Put the request's whole blocks with KV into the radix cache while it runs.

        Concurrent requests with the same prefix then reuse them. The request's lock
        moves to the longer prefix; it keeps its own blocks (where the cache already
        had an equal block, both stay valid).
        """
        if not self.enable_prefix_cache or req.num_kv_tokens < self.block_size:
            return
        result = self.radix.insert(req.token_ids[: req.num_kv_tokens], req.block_ids)
        self.radix.lock(result.handle)
        if req.prefix_handle is not None:
            self.radix.unlock(req.prefix_handle)
        req.prefix_handle = result.handle

    def release(self, req: Request) -> None:
        """Hand the request's blocks back: whole blocks with KV go to the radix cache."""
        if self.enable_prefix_cache and req.num_kv_tokens:
            self.radix.insert(req.token_ids[: req.num_kv_tokens], req.block_ids)
        if req.prefix_handle is not None:
            self.radix.unlock(req.prefix_handle)
        self.pool.decref(req.block_ids)
        req.block_ids = []
        req.prefix_handle = None
        req.num_kv_tokens = 0
