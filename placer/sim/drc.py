"""Prefix caches at block granularity: P's prefix store and each MD's decode-side radix cache.

in:  prompts as tuples of block ids (Mooncake ``hash_ids``: one id per 512-token block;
     equal ids mean the same prefix up to and including that block)
out: how many leading tokens of a prompt a cache holds; inserts with LRU eviction.

Because an id names its whole prefix, a radix tree over blocks is a set of ids with
the prefix property kept by eviction order: a prompt's blocks are touched deepest
first, so a parent is always more recent than its children and LRU eviction removes
leaves before the blocks they hang from. No device memory, no torch: policy only.
`BlockCache` is a `placer.prefix.PrefixCache` whose block keys are the trace's ids.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

from placer.prefix import cached_tokens, leading_blocks
from placer.workload.trace import BLOCK_TOKENS


class BlockCache:
    """LRU cache of prefix blocks; ``capacity_blocks`` None = never evicts."""

    __slots__ = ("capacity_blocks", "blocks", "lookups", "hit_tokens", "query_tokens")

    def __init__(self, capacity_blocks: int | None = None):
        self.capacity_blocks = capacity_blocks
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.lookups = 0
        self.hit_tokens = 0
        self.query_tokens = 0

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def block_tokens(self) -> int:
        """Tokens per block: the trace's (`BLOCK_TOKENS`)."""
        return BLOCK_TOKENS

    def match_blocks(self, keys: Sequence[Hashable]) -> int:
        """Leading blocks of the prompt present in the cache (no state change)."""
        return leading_blocks(keys, self.blocks)

    def match_tokens(self, hash_ids: tuple[int, ...], input_tokens: int) -> int:
        """Leading tokens of the prompt present in the cache (no state change)."""
        return cached_tokens(leading_blocks(hash_ids, self.blocks), input_tokens, BLOCK_TOKENS)

    def record(self, matched_tokens: int, input_tokens: int) -> None:
        """Count one lookup's outcome in the cache's hit-rate statistics."""
        self.lookups += 1
        self.hit_tokens += matched_tokens
        self.query_tokens += input_tokens

    def insert(self, hash_ids: tuple[int, ...]) -> None:
        """Add (or refresh) a prompt's blocks, then evict least-recently-used leaves."""
        self.insert_blocks(hash_ids)

    def insert_blocks(self, keys: Sequence[Hashable], block_ids: Sequence[int] | None = None) -> None:
        """`insert` (the protocol's name; no KV here, so `block_ids` are ignored)."""
        blocks = self.blocks
        move = blocks.move_to_end
        for block in reversed(keys):
            if block in blocks:
                move(block)
            else:
                blocks[block] = None
        cap = self.capacity_blocks
        if cap is not None:
            while len(blocks) > cap:
                blocks.popitem(last=False)

    @property
    def hit_rate(self) -> float:
        """Token-weighted hit rate over the recorded lookups."""
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0
