"""Radix prefix cache: longest block-aligned match, locks, LRU eviction, no leaks."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.engine.block_pool import BlockPool
from executor.engine.radix_cache import RadixCache

BS = 4


def _cache(num_blocks: int = 32) -> tuple[BlockPool, RadixCache]:
    pool = BlockPool(num_blocks)
    return pool, RadixCache(pool, BS)


def _insert(pool: BlockPool, cache: RadixCache, tokens: list[int]) -> tuple[int, ...]:
    """Insert as a finished request would: allocate, insert, drop the request's refs."""
    blocks = pool.allocate(len(tokens) // BS)
    result = cache.insert(tokens, blocks)
    pool.decref(blocks)
    return result.block_ids


def test_match_returns_longest_block_aligned_prefix():
    pool, cache = _cache()
    blocks = _insert(pool, cache, list(range(12)))
    assert cache.match(list(range(10))).num_tokens == 8
    assert cache.match(list(range(10))).block_ids == blocks[:2]
    assert cache.match([*range(12), 99]).num_tokens == 12
    assert cache.match([0, 1, 2]).num_tokens == 0  # a partial block is never a hit
    assert cache.match([0, 1, 2, 9, 4]).num_tokens == 0
    assert cache.match([]).num_tokens == 0


def test_branches_share_their_common_blocks():
    pool, cache = _cache()
    a = _insert(pool, cache, [1, 2, 3, 4, 5, 6, 7, 8])
    b = _insert(pool, cache, [1, 2, 3, 4, 9, 9, 9, 9])
    assert a[0] == b[0] and a[1] != b[1]
    assert cache.num_blocks == 3
    assert pool.num_used == 3  # the duplicate first block went back to the pool


def test_insert_ignores_partial_tail_and_keeps_existing_blocks():
    pool, cache = _cache()
    first = _insert(pool, cache, list(range(10)))
    assert len(first) == 2
    again = cache.insert(list(range(8)), pool.allocate(2))
    assert again.block_ids == first and again.num_new_blocks == 0


def test_locked_prefix_survives_eviction_and_unlocked_one_goes():
    pool, cache = _cache()
    kept = _insert(pool, cache, [1] * 8)
    _insert(pool, cache, [2] * 8)
    match = cache.match([1] * 8)
    cache.lock(match.handle)
    freed = cache.evict(100)
    assert freed == 2
    assert cache.cached_block_ids() == set(kept)
    assert cache.match([1] * 8).num_tokens == 8
    cache.unlock(match.handle)
    assert cache.evict(100) == 2
    assert pool.num_free == pool.num_blocks and cache.num_blocks == 0


def test_lock_pins_ancestors_but_not_siblings():
    pool, cache = _cache()
    _insert(pool, cache, [1, 1, 1, 1, 2, 2, 2, 2])
    _insert(pool, cache, [1, 1, 1, 1, 3, 3, 3, 3])
    handle = cache.match([1, 1, 1, 1, 2, 2, 2, 2]).handle
    cache.lock(handle)
    assert cache.num_evictable_blocks == 1
    assert cache.evict(5) == 1
    assert cache.match([1, 1, 1, 1, 3, 3, 3, 3]).num_tokens == 4
    cache.unlock(handle)


def test_eviction_is_least_recently_used_first():
    pool, cache = _cache()
    _insert(pool, cache, [1] * 4)
    _insert(pool, cache, [2] * 4)
    cache.match([1] * 4)  # touch: [2]*4 is now the oldest
    assert cache.evict(1) == 1
    assert cache.match([1] * 4).num_tokens == 4
    assert cache.match([2] * 4).num_tokens == 0


def test_unlock_without_lock_and_lock_after_eviction_are_errors():
    pool, cache = _cache()
    _insert(pool, cache, [5] * 4)
    handle = cache.match([5] * 4).handle
    with pytest.raises(ValueError, match="without a matching lock"):
        cache.unlock(handle)
    cache.evict(1)
    with pytest.raises(ValueError, match="evicted"):
        cache.lock(handle)


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.lists(st.integers(0, 2), min_size=0, max_size=14)),
        st.tuples(st.just("lock"), st.lists(st.integers(0, 2), min_size=0, max_size=14)),
        st.tuples(st.just("unlock"), st.integers(0, 50)),
        st.tuples(st.just("evict"), st.integers(0, 6)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_random_operations_keep_pool_invariants(ops):
    pool, cache = _cache(num_blocks=12)
    locks = []  # (handle, block ids pinned by it)
    for op, arg in ops:
        if op == "insert":
            n = len(arg) // BS
            if n > pool.num_free:
                cache.evict(n - pool.num_free)
            if n <= pool.num_free:
                _insert(pool, cache, arg)
        elif op == "lock":
            match = cache.match(arg)
            cache.lock(match.handle)
            locks.append((match.handle, match.block_ids, arg[: match.num_tokens]))
        elif op == "unlock" and locks:
            handle, _, _ = locks.pop(arg % len(locks))
            cache.unlock(handle)
        elif op == "evict":
            cache.evict(arg)
        # The cache is the only holder here: tree blocks have one reference, the rest are free.
        tree = cache.cached_block_ids()
        assert len(tree) == cache.num_blocks
        assert pool.num_free == pool.num_blocks - len(tree)
        assert all(pool.refcount(b) == (1 if b in tree else 0) for b in range(pool.num_blocks))
        for _, blocks, tokens in locks:  # a locked prefix is never evicted
            assert set(blocks) <= tree
            assert cache.match(tokens).block_ids == blocks
    for handle, _, _ in locks:
        cache.unlock(handle)
    cache.evict(pool.num_blocks)
    assert pool.num_free == pool.num_blocks and cache.num_blocks == 0
