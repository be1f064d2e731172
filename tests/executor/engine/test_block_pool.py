"""Block pool: allocation, reference counts, typed out-of-blocks error."""

import pytest

from executor.engine.block_pool import BlockPool, OutOfBlocksError


def test_allocate_hands_out_distinct_blocks_until_empty():
    pool = BlockPool(4)
    ids = pool.allocate(3) + pool.allocate(1)
    assert sorted(ids) == [0, 1, 2, 3]
    assert pool.num_free == 0
    with pytest.raises(OutOfBlocksError) as err:
        pool.allocate(1)
    assert (err.value.requested_blocks, err.value.free_blocks) == (1, 0)


def test_failed_allocation_takes_nothing():
    pool = BlockPool(4)
    pool.allocate(3)
    with pytest.raises(OutOfBlocksError, match="requested 2, only 1 free"):
        pool.allocate(2)
    assert pool.num_free == 1


def test_shared_block_is_freed_by_its_last_holder_only():
    pool = BlockPool(2)
    (b,) = pool.allocate(1)
    pool.incref([b])
    assert pool.refcount(b) == 2
    assert pool.decref([b]) == 0 and pool.num_free == 1
    assert pool.decref([b]) == 1 and pool.num_free == 2
    assert pool.refcount(b) == 0


def test_double_free_and_sharing_a_free_block_are_errors():
    pool = BlockPool(2)
    (b,) = pool.allocate(1)
    pool.decref([b])
    with pytest.raises(ValueError, match="double free"):
        pool.decref([b])
    with pytest.raises(ValueError, match="is free"):
        pool.incref([b])
    with pytest.raises(ValueError, match="outside the pool"):
        pool.refcount(7)


def test_pool_size_must_be_positive():
    with pytest.raises(ValueError, match="num_blocks"):
        BlockPool(0)
