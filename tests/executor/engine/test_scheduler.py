"""Scheduler and block manager: continuous batching within the block budget (no model)."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.engine.block_pool import OutOfBlocksError
from executor.engine.kv_manager import BlockManager
from executor.engine.request import Request, RequestStatus, SamplingParams
from executor.engine.scheduler import BatchKind, Scheduler

BS = 4


def _request(prompt: list[int], max_new: int) -> Request:
    return Request(list(prompt), len(prompt), SamplingParams(max_new_tokens=max_new), eos_token_id=None)


def _fake_next_token(req: Request) -> int:
    return (sum(req.token_ids) * 31 + req.num_tokens) % 200


def _check_budget(blocks: BlockManager, batch: tuple[Request, ...], running: list[Request]) -> None:
    """Scheduled requests have blocks for their tokens; reference counts add up."""
    for r in batch:
        assert len(r.block_ids) >= blocks.blocks_for(r.num_tokens), "a scheduled request lacks blocks"
    held: dict[int, int] = {}
    for r in running:
        for b in r.block_ids:
            held[b] = held.get(b, 0) + 1
    tree = blocks.radix.cached_block_ids()
    for b in range(blocks.pool.num_blocks):
        assert blocks.pool.refcount(b) == held.get(b, 0) + (b in tree)
    assert len(set(held) | tree) <= blocks.pool.num_blocks


def _run(sched: Scheduler, arrivals: dict[int, list[Request]], max_steps: int = 2000):
    """Drive the scheduler, adding requests at given steps; returns the batches run."""
    history = []
    for step in range(max_steps):
        for req in arrivals.get(step, []):
            sched.add(req)
        if not sched.has_work() and step > max(arrivals, default=0):
            return history
        batch = sched.schedule()
        if batch is None:
            continue
        running_before = [r for r in sched.running if r not in batch.requests]
        _check_budget(sched.blocks, batch.requests, sched.running)
        history.append((batch, running_before))
        sched.postprocess(batch, [_fake_next_token(r) for r in batch.requests])
    raise AssertionError("scheduler did not drain")


def test_new_requests_join_while_others_decode():
    blocks = BlockManager(num_blocks=64, block_size=BS)
    sched = Scheduler(blocks, max_running_requests=8, max_prefill_tokens=256)
    first = _request(list(range(10)), max_new=12)
    late = _request(list(range(50, 57)), max_new=4)
    history = _run(sched, {0: [first], 3: [late]})
    admitted_late = [(b, before) for b, before in history if late in b.requests and b.kind is not BatchKind.DECODE]
    assert admitted_late, "the late request was never prefilled"
    _, running_then = admitted_late[0]
    assert first in running_then  # it joined mid-decode instead of waiting for `first` to end
    assert [b.kind for b, _ in history].count(BatchKind.DECODE) >= 11
    assert first.num_generated == 12 and late.num_generated == 4
    assert any(len(b.requests) == 2 for b, _ in history if b.kind is BatchKind.DECODE)


def test_tight_pool_preempts_and_still_finishes_everyone():
    blocks = BlockManager(num_blocks=12, block_size=BS)
    sched = Scheduler(blocks, max_running_requests=8, max_prefill_tokens=256)
    rng = random.Random(0)
    reqs = [_request([rng.randrange(200) for _ in range(rng.randrange(3, 14))], max_new=10) for _ in range(8)]
    _run(sched, {0: reqs[:4], 5: reqs[4:]})
    assert all(r.status is RequestStatus.FINISHED and r.num_generated == 10 for r in reqs)
    assert sched.num_preemptions > 0  # the load did not fit at once
    assert blocks.pool.num_used == blocks.radix.num_blocks  # only the cache holds blocks now


def test_shared_prefix_is_admitted_as_extend_with_cached_tokens():
    blocks = BlockManager(num_blocks=64, block_size=BS)
    sched = Scheduler(blocks, max_running_requests=8, max_prefill_tokens=256)
    a = _request(list(range(13)), max_new=2)
    _run(sched, {0: [a]})
    b = _request([*range(12), 99, 98], max_new=2)
    history = _run(sched, {0: [b]})
    assert history[0][0].kind is BatchKind.EXTEND
    assert b.num_cached_tokens == 12


def test_limits_on_running_requests_and_prefill_tokens():
    blocks = BlockManager(num_blocks=64, block_size=BS)
    sched = Scheduler(blocks, max_running_requests=2, max_prefill_tokens=10)
    reqs = [_request([i] * 6, max_new=3) for i in range(4)]
    history = _run(sched, {0: reqs})
    assert max(len(b.requests) for b, _ in history) <= 2
    prefills = [b for b, _ in history if b.kind is BatchKind.PREFILL]
    assert all(len(b.requests) == 1 for b in prefills)  # 6 + 6 tokens > 10
    assert all(r.num_generated == 3 for r in reqs)


def test_request_larger_than_the_pool_is_rejected_up_front():
    sched = Scheduler(BlockManager(num_blocks=4, block_size=BS), 4, 64)
    with pytest.raises(ValueError, match="needs 5 KV blocks but the pool has 4"):
        sched.add(_request(list(range(16)), max_new=4))


def test_block_manager_raises_typed_error_when_nothing_can_be_evicted():
    blocks = BlockManager(num_blocks=2, block_size=BS)
    req = _request(list(range(8)), max_new=1)
    blocks.grow(req, 8)
    other = _request(list(range(4)), max_new=1)
    with pytest.raises(OutOfBlocksError):
        blocks.grow(other, 4)
    req.num_kv_tokens = 8
    blocks.release(req)  # its blocks are cached, unlocked: allocation may evict them
    blocks.grow(other, 4)
    assert len(other.block_ids) == 1


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 14), st.integers(1, 8), st.integers(0, 3), st.integers(0, 6)),
             min_size=1, max_size=10),
    st.integers(6, 20),
)
def test_random_workloads_drain_within_budget(specs, num_blocks):
    blocks = BlockManager(num_blocks=num_blocks, block_size=BS)
    sched = Scheduler(blocks, max_running_requests=4, max_prefill_tokens=24)
    arrivals: dict[int, list[Request]] = {}
    reqs = []
    for prompt_len, max_new, family, arrival in specs:
        if blocks.blocks_for(prompt_len + max_new) > num_blocks:
            continue
        req = _request([family] * prompt_len, max_new)  # families share prefixes
        reqs.append(req)
        arrivals.setdefault(arrival, []).append(req)
    _run(sched, arrivals)
    assert all(r.num_generated == r.sampling.max_new_tokens for r in reqs)
    blocks.radix.evict(num_blocks)
    assert blocks.pool.num_free == num_blocks  # nothing leaked
