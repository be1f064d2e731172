"""Chunked prefill (`EngineConfig.chunked_prefill_tokens`): long prompts in chunks mixed into decode steps.

What a user of an aggregated instance notices: the same greedy tokens as without chunking, no
step computing more prompt tokens than the chunk, and running decodes advancing on every step
while a long prompt is being prefilled (TPOT bounded by the chunk, not by the prompt).
"""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor.engine import EngineConfig, SamplingParams
from executor.engine.kv_manager import BlockManager
from executor.engine.request import Request, RequestStatus
from executor.engine.scheduler import BatchKind, Scheduler

NO_EOS = SamplingParams(max_new_tokens=10, stop_at_eos=False)
CHUNK = 8


def _long_prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [256, *(rng.randrange(256) for _ in range(n - 1))]


def _serve(engine, arrivals: dict[int, list[list[int]]]):
    """Step the engine, submitting prompts at given steps; returns the requests and each step's
    batch with its number of decode rows (one token over KV, counted before the forward)."""
    reqs, batches, step = [], [], 0
    original = engine.scheduler.schedule

    def recording():
        batch = original()
        if batch is not None:
            decodes = sum(n == 1 and r.num_kv_tokens > 0 for r, n in zip(batch.requests, batch.new_tokens()))
            batches.append((batch, decodes))
        return batch

    engine.scheduler.schedule = recording
    while step <= max(arrivals) or engine.scheduler.has_work():
        for p in arrivals.get(step, []):
            reqs.append(engine.submit(p, NO_EOS))
        engine.step()
        step += 1
    return reqs, batches


def test_chunked_outputs_equal_unchunked_with_long_prompts_among_running_decodes(make_engine):
    # three prompts longer than several chunks (5-9 chunks each) arrive while shorter ones decode
    arrivals = {0: [_long_prompt(12, 1), _long_prompt(9, 2)], 2: [_long_prompt(45, 3)],
                4: [_long_prompt(70, 4), _long_prompt(5, 5)], 6: [_long_prompt(60, 6)]}
    want, _ = _serve(make_engine(num_blocks=128), arrivals)
    got, batches = _serve(make_engine(num_blocks=128, chunked_prefill_tokens=CHUNK), arrivals)
    assert [r.output_ids for r in got] == [r.output_ids for r in want]
    assert all(len(r.output_ids) == NO_EOS.max_new_tokens for r in got)
    mixed = [b for b, decodes in batches if b.num_prompt_tokens and decodes]
    assert mixed, "no step mixed a prompt chunk into decodes"
    assert all(b.kind is BatchKind.EXTEND for b in mixed)


def test_no_step_computes_more_prompt_tokens_than_the_chunk(make_engine):
    arrivals = {0: [_long_prompt(40, 1)], 1: [_long_prompt(33, 2), _long_prompt(3, 3), _long_prompt(4, 4)]}
    _, batches = _serve(make_engine(num_blocks=128, chunked_prefill_tokens=CHUNK), arrivals)
    per_step = [b.num_prompt_tokens for b, _ in batches]
    assert max(per_step) == CHUNK  # full chunks are used ...
    assert all(n <= CHUNK for n in per_step)  # ... and never exceeded
    unchunked = _serve(make_engine(num_blocks=128), arrivals)[1]
    assert max(b.num_prompt_tokens for b, _ in unchunked) >= 40  # the whole prompt in one forward


def test_a_decoding_request_advances_on_every_step_while_a_long_prompt_is_chunked(make_engine):
    engine = make_engine(num_blocks=128, chunked_prefill_tokens=CHUNK)
    running = engine.submit(_long_prompt(6, 1), SamplingParams(max_new_tokens=30, stop_at_eos=False))
    engine.step()  # its prefill: now it decodes
    long = engine.submit(_long_prompt(64, 2), NO_EOS)
    steps = 0
    while not long.output_ids:
        before = running.num_generated
        stepped = dict(engine.step())
        steps += 1
        assert running in stepped and running.num_generated == before + 1  # one token per step
    assert steps == 64 // CHUNK  # the prompt took 8 chunk steps, each also a decode step of `running`
    unchunked = make_engine(num_blocks=128)
    r2 = unchunked.submit(_long_prompt(6, 1), SamplingParams(max_new_tokens=30, stop_at_eos=False))
    unchunked.step()
    unchunked.submit(_long_prompt(64, 2), NO_EOS)
    assert r2 not in dict(unchunked.step())  # without chunking the whole prompt's forward stalls it


def test_role_prefill_in_chunks_equals_one_forward(make_engine):
    prompt = _long_prompt(50, 7)
    whole = make_engine().prefill(prompt, NO_EOS)
    engine = make_engine(chunked_prefill_tokens=CHUNK)
    chunked = engine.prefill(prompt, NO_EOS)
    assert chunked.first_token == whole.first_token
    assert engine.decode_step([chunked.request]) == make_engine().generate(prompt, 2, NO_EOS)[1:]
    # its whole blocks were published chunk by chunk: a second request reuses them
    assert engine.prefill(prompt[:40] + [1, 2], NO_EOS).num_cached_tokens == 40


def test_preempted_mid_prefill_request_releases_its_blocks_and_finishes():
    blocks = BlockManager(num_blocks=12, block_size=4)
    sched = Scheduler(blocks, max_running_requests=4, max_prefill_tokens=64, chunk_tokens=4)
    dec = Request(list(range(5)), 5, SamplingParams(max_new_tokens=30), eos_token_id=None)
    sched.add(dec)
    while dec.num_generated < 15:  # 20 tokens: 5 of the 12 blocks; the long prompt needs 8 more
        _fake_step(sched)
    long = Request([7] * 30, 30, SamplingParams(max_new_tokens=2), eos_token_id=None)
    sched.add(long)
    preempted_mid_prefill = False
    for _ in range(400):
        if not sched.has_work():
            break
        before = sched.num_preemptions
        _fake_step(sched)
        if sched.num_preemptions > before and long.status is RequestStatus.WAITING and long.num_generated == 0:
            preempted_mid_prefill = True
            assert long.block_ids == [] and long.num_kv_tokens == 0  # nothing held while waiting
    assert preempted_mid_prefill
    assert dec.num_generated == 30 and long.num_generated == 2
    blocks.radix.evict(12)
    assert blocks.pool.num_free == 12  # nothing leaked


def _fake_step(sched: Scheduler) -> None:
    _fake_step_batch(sched, sched.schedule())


def _fake_step_batch(sched: Scheduler, batch) -> None:
    """What the engine does with a batch, without a model: KV for the new tokens, a token when done."""
    counts = batch.new_tokens()
    tokens = []
    for r, n in zip(batch.requests, counts):
        done = r.num_kv_tokens + n == r.num_tokens
        r.num_kv_tokens += n
        tokens.append((sum(r.token_ids) % 200) if done else None)
    sched.postprocess(batch, tokens)


def test_chunk_size_is_validated():
    with pytest.raises(ValueError, match="chunked_prefill_tokens must be a positive int"):
        EngineConfig(backend="torch", chunked_prefill_tokens=0)


def test_triton_backend_serves_mixed_chunk_steps_like_torch(make_engine):
    """Decode rows and a prompt chunk in one EXTEND forward through the triton kernels (Triton's
    interpreter on a CPU-only machine): the torch backend's greedy tokens."""
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    arrivals = {0: [_long_prompt(5, 1)], 1: [_long_prompt(14, 2)]}
    want, _ = _serve(make_engine(backend="torch", dev=dev, chunked_prefill_tokens=4), arrivals)
    got, batches = _serve(make_engine(backend="triton", dev=dev, chunked_prefill_tokens=4), arrivals)
    assert any(b.kind is BatchKind.EXTEND and decodes for b, decodes in batches)
    assert [r.output_ids for r in got] == [r.output_ids for r in want]


def test_cancelling_a_request_mid_prefill_frees_its_blocks_and_keeps_its_computed_prefix(make_engine):
    engine = make_engine(num_blocks=64, chunked_prefill_tokens=CHUNK)
    prompt = _long_prompt(40, 8)
    req = engine.submit(prompt, NO_EOS)
    engine.step(), engine.step()  # 16 of its 40 tokens have KV
    assert req.num_kv_tokens == 2 * CHUNK and not req.output_ids
    engine.finish(req)  # the client went away
    assert not engine.scheduler.has_work()
    assert engine.blocks.pool.num_used == engine.blocks.radix.num_blocks  # only the cache holds blocks
    again = engine.submit(prompt, NO_EOS)
    while engine.scheduler.has_work():
        engine.step()
    assert again.num_cached_tokens == 2 * CHUNK  # the chunks it computed were kept for the next one
    assert again.output_ids == make_engine().generate(prompt, NO_EOS.max_new_tokens, NO_EOS)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 30), st.integers(1, 8), st.integers(0, 3), st.integers(0, 6)),
             min_size=1, max_size=10),
    st.integers(8, 24),
    st.integers(1, 9),
)
def test_random_chunked_workloads_drain_within_the_chunk_and_the_pool(specs, num_blocks, chunk):
    """Any mix of prompts (sharing prefixes), budgets and arrivals on a small pool: every request
    ends with its budget of tokens, no step carries more than `chunk` prompt tokens, nothing leaks."""
    blocks = BlockManager(num_blocks=num_blocks, block_size=4)
    sched = Scheduler(blocks, max_running_requests=4, max_prefill_tokens=64, chunk_tokens=chunk)
    arrivals: dict[int, list[Request]] = {}
    for prompt_len, max_new, family, arrival in specs:
        if blocks.blocks_for(prompt_len + max_new) <= num_blocks:
            req = Request([family] * prompt_len, prompt_len, SamplingParams(max_new_tokens=max_new), eos_token_id=None)
            arrivals.setdefault(arrival, []).append(req)
    reqs = [r for batch in arrivals.values() for r in batch]
    for step in range(3000):
        for req in arrivals.get(step, []):
            sched.add(req)
        if not sched.has_work() and step > max(arrivals, default=0):
            break
        batch = sched.schedule()
        if batch is not None:
            assert batch.num_prompt_tokens <= chunk
            _fake_step_batch(sched, batch)
    else:
        raise AssertionError("the scheduler did not drain")
    assert all(r.num_generated == r.sampling.max_new_tokens for r in reqs)
    blocks.radix.evict(num_blocks)
    assert blocks.pool.num_free == num_blocks
