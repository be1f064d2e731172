"""One prefix-cache protocol: the engine's radix cache, the router's index and the simulator's
block cache answer the same questions the same way, and count cached tokens with one rule."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import pytest

from executor.engine.block_pool import BlockPool
from executor.engine.radix_cache import RadixCache
from executor.routing import PrefixIndex
from placer.prefix import PrefixCache, cached_tokens, leading_blocks
from placer.sim.drc import BlockCache
from placer.workload.trace import BLOCK_TOKENS

Insert = Callable[[Sequence[Hashable]], None]


def _radix() -> tuple[RadixCache, Insert]:
    pool = BlockPool(64)
    cache = RadixCache(pool, 4)

    def insert(keys: Sequence[Hashable]) -> None:  # as a finished request does: its KV's blocks, then its refs go
        blocks = pool.allocate(len(keys))
        cache.insert_blocks(keys, blocks)
        pool.decref(blocks)

    return cache, insert


def _index() -> tuple[PrefixIndex, Insert]:
    cache = PrefixIndex(block_size=4)
    return cache, cache.insert_blocks


def _block_cache() -> tuple[BlockCache, Insert]:
    cache = BlockCache()
    return cache, cache.insert_blocks


CACHES = {"engine RadixCache": _radix, "router PrefixIndex": _index, "simulator BlockCache": _block_cache}
# Keys name their whole prefix (as a trace's hash_ids do): a branch's blocks get keys of their own.
A = [("a", 0), ("a", 1), ("a", 2)]
B = [("a", 0), ("a", 1), ("b", 2), ("b", 3)]  # shares A's first two blocks, then diverges


@pytest.fixture(params=list(CACHES), ids=list(CACHES))
def cache_and_insert(request) -> tuple[PrefixCache, Insert]:
    return CACHES[request.param]()


def test_each_cache_is_a_prefix_cache(cache_and_insert):
    cache, _ = cache_and_insert
    assert isinstance(cache, PrefixCache)


def test_an_empty_cache_matches_nothing(cache_and_insert):
    cache, _ = cache_and_insert
    assert cache.match_blocks(A) == 0
    assert cache.match_blocks([]) == 0


def test_an_inserted_prompt_is_matched_with_its_prefixes(cache_and_insert):
    cache, insert = cache_and_insert
    insert(A)
    assert cache.match_blocks(A) == 3
    assert cache.match_blocks(A[:2]) == 2  # a prefix of what is cached
    assert cache.match_blocks([*A, ("a", 3)]) == 3  # a longer prompt: only what is cached


def test_a_diverging_prompt_matches_the_common_prefix_only(cache_and_insert):
    cache, insert = cache_and_insert
    insert(A)
    assert cache.match_blocks(B) == 2
    assert cache.match_blocks([("c", 0), *A[1:]]) == 0  # a different first block: no hit at all
    insert(B)  # both branches are now cached, the shared blocks once
    assert (cache.match_blocks(A), cache.match_blocks(B)) == (3, 4)


def test_cached_tokens_count_a_partial_last_block_by_the_prompts_tokens(cache_and_insert):
    cache, insert = cache_and_insert
    bs = cache.block_tokens
    insert(A)  # a prompt of 2.5 blocks: its third block is partial
    n_in = 2 * bs + bs // 2
    assert cached_tokens(cache.match_blocks(A), n_in, bs) == n_in  # all of it, not 3 whole blocks
    assert cached_tokens(cache.match_blocks(B), n_in, bs) == 2 * bs  # two whole blocks of it
    assert cached_tokens(cache.match_blocks(A), bs + 1, bs) == bs + 1  # a match longer than the prompt


def test_the_engines_cache_needs_the_blocks_that_hold_the_kv():
    cache, _ = _radix()
    with pytest.raises(TypeError, match="block"):
        cache.insert_blocks(A)


@pytest.mark.parametrize("make,native_tokens", [(_radix, lambda cache, prompt: cache.match(prompt).num_tokens),
                                                (_index, lambda cache, prompt: cache.match(prompt))],
                         ids=["engine RadixCache", "router PrefixIndex"])
def test_token_caches_key_blocks_by_their_token_ids_and_match_as_their_native_api(make, native_tokens):
    cache, insert = make()
    tokens = list(range(10))  # two whole blocks of 4 and a partial one, which is never cached
    assert cache.block_keys(tokens) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    insert(cache.block_keys(tokens))
    for prompt, want in ((tokens, 8), (tokens[:7], 4), ([0, 1, 2, 3, 9, 9, 9, 9], 4), ([9, *tokens], 0)):
        assert native_tokens(cache, prompt) == want
        assert cached_tokens(cache.match_blocks(cache.block_keys(prompt)), len(prompt), cache.block_tokens) == want


def test_the_trace_caches_count_tokens_with_the_one_rule():
    cache = BlockCache()
    cache.insert((1, 2, 3))
    for ids, n_in in (((1, 2, 3), 1200), ((1, 2, 9), 1536), ((1, 2, 3, 4), 2000), ((1, 2, 3), 700)):
        matched = leading_blocks(ids, cache.blocks)
        assert cache.match_tokens(ids, n_in) == cached_tokens(matched, n_in, BLOCK_TOKENS)
    assert cache.match_tokens((1, 2, 3), 1200) == 1200 and cache.match_tokens((1, 2, 9), 1536) == 1024
