"""One protocol for the project's prefix caches, and the one count of the tokens they hold.

in:  a prompt as a sequence of block keys, one per block in order — the engine's
     and the router's caches key a block by its token ids (``block_tokens`` of them),
     a Mooncake trace by its ``hash_ids``; two prompts share their first k blocks
     when their first k keys are equal.
out: how many leading blocks a cache holds (:meth:`PrefixCache.match_blocks`), and
     from that how many of the prompt's tokens it holds (:func:`cached_tokens`); which of
     several instances a request goes to by their caches (:func:`pick_by_prefix`).

The implementations: the engine's paged radix cache
(``executor.engine.radix_cache.RadixCache``, which also holds each block's KV id and
pins prefixes while requests read them), the router's guess of an instance's cache
(``executor.routing.PrefixIndex``) and the simulator's caches over trace blocks
(``placer.sim.drc.BlockCache``). Standard library only: the executor imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Hashable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

#: c of consistent hashing with bounded loads (Mirrokni, Thorup & Zadimoghaddam, SODA 2018): a
#: request may go to its cache's instance only while that leaves it at most c × the mean load of
#: the candidates. c = 1 + ε with ε = 0.25, the value of its first deployment (Vimeo's video
#: cache, 2016). Not fitted to any case of ours: the planner splits a pool's load evenly over its
#: instances, and this bounds how far the routers may stray from that split for a cache hit.
LOAD_BOUND = 1.25


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


def pick_by_prefix(candidates: Sequence[T], hit: Callable[[T], int], load: Callable[[T], int],
                   rank: Callable[[T], tuple] = lambda _: (), bound: float = LOAD_BOUND) -> T:
    """The instance a request goes to among `candidates` (not empty): the longest cached prefix
    (`hit`, tokens) among those whose `load` (requests held: running and waiting) stays within
    ``ceil(bound × (Σ load + 1) / n)`` after taking it, then by `rank`, then the least loaded.

    The one rule of the simulator's and the executor's routers for a decoder with a prefix cache.
    Without the bound the longest hit always wins, and a prefix every request shares (a system
    prompt, a trace's first block) sends them all to the one instance that cached it first while
    the others idle; with it, the hit still decides among instances near the mean load. The least
    loaded instance is always within the bound, so some candidate always is.
    """
    loads = [load(c) for c in candidates]
    cap = math.ceil(bound * (sum(loads) + 1) / len(candidates))
    room = [c for c, n in zip(candidates, loads) if n + 1 <= cap]
    return min(room, key=lambda c: (-hit(c), rank(c), load(c)))
