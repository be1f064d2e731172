"""One protocol for the project's prefix caches, and the one count of the tokens they hold.

in:  a prompt as a sequence of block keys, one per block in order — the engine's
     and the router's caches key a block by its token ids (``block_tokens`` of them),
     a Mooncake trace by its ``hash_ids``; two prompts share their first k blocks
     when their first k keys are equal.
out: how many leading blocks a cache holds (:meth:`PrefixCache.match_blocks`), and
     from that how many of the prompt's tokens it holds (:func:`cached_tokens`).

The implementations: the engine's paged radix cache
(``executor.engine.radix_cache.RadixCache``, which also holds each block's KV id and
pins prefixes while requests read them), the router's guess of an instance's cache
(``executor.routing.PrefixIndex``) and the simulator's caches over trace blocks
(``placer.sim.drc.BlockCache``). Standard library only: the executor imports it.
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class PrefixCache(Protocol):
    """A cache of prompt prefixes at block granularity (module docstring).

    Whether a match refreshes the blocks it found (for LRU eviction) is the cache's
    own policy; what it evicts, and when, too.
    """

    @property
    def block_tokens(self) -> int:
        """Tokens per block (a prompt's last block may hold fewer)."""
        ...

    def match_blocks(self, keys: Sequence[Hashable]) -> int:
        """How many leading blocks of the prompt `keys` the cache holds."""
        ...

    def insert_blocks(self, keys: Sequence[Hashable], block_ids: Sequence[int] | None = None) -> None:
        """Cache the prompt's blocks `keys`. `block_ids`: where each block's KV lives, for a
        cache that holds KV (the engine's needs them); a cache that only knows which
        prefixes exist ignores them."""
        ...


def leading_blocks(keys: Sequence[Hashable], present: Container) -> int:
    """How many leading keys of `keys` are in `present` (a cache whose every key names its whole
    prefix, as a Mooncake ``hash_ids`` entry does, is a set of keys)."""
    n = 0
    for key in keys:
        if key not in present:
            break
        n += 1
    return n


def cached_tokens(matched_blocks: int, input_tokens: int, block_tokens: int) -> int:
    """Tokens of a prompt of `input_tokens` held by a cache that matched its first `matched_blocks`
    blocks: whole blocks, but never more than the prompt (a matched partial last block counts
    only the prompt's tokens in it, as does a match longer than the prompt)."""
    return min(matched_blocks * block_tokens, input_tokens)
