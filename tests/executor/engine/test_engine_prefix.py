"""Prefill over a radix-cache hit equals prefill from scratch."""

import torch

from executor.engine import SamplingParams

NO_EOS = SamplingParams(max_new_tokens=64, stop_at_eos=False)


def _continue(engine, req, steps):
    return [engine.decode_step([req])[0] for _ in range(steps)]


def test_cached_prefix_prefill_matches_scratch(make_engine, prompt):
    warm, cold = make_engine(), make_engine()
    first = warm.prefill([*prompt[:17], 7, 7, 7], NO_EOS)
    warm.finish(first.request)  # its 5 whole blocks (20 tokens) are now cached

    hit = warm.prefill(prompt, NO_EOS)
    miss = cold.prefill(prompt, NO_EOS)
    assert hit.num_cached_tokens == 16  # 17 shared tokens → 4 whole blocks of 4
    assert miss.num_cached_tokens == 0
    assert hit.first_token == miss.first_token
    assert set(hit.block_ids[:4]) <= set(first.block_ids)  # the cached blocks were reused
    n = len(prompt)
    k_hit = warm.export_kv(hit.request, 0, n)
    k_miss = cold.export_kv(miss.request, 0, n)
    torch.testing.assert_close(k_hit.k, k_miss.k, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k_hit.v, k_miss.v, rtol=1e-5, atol=1e-5)
    assert _continue(warm, hit.request, 10) == _continue(cold, miss.request, 10)


def test_fully_cached_prompt_still_yields_its_first_token(make_engine, prompt):
    engine = make_engine()
    prompt = prompt[:20]  # exactly 5 blocks
    a = engine.prefill(prompt, NO_EOS)
    engine.finish(a.request)
    b = engine.prefill(prompt, NO_EOS)
    assert b.num_cached_tokens == 16  # the last token is always recomputed for its logits
    assert b.first_token == a.first_token


def test_running_request_shares_its_prompt_blocks(make_engine, prompt):
    engine = make_engine()
    a = engine.prefill(prompt, NO_EOS)  # not finished: its blocks are published at once
    b = engine.prefill([*prompt[:12], 1, 2, 3], NO_EOS)
    assert b.num_cached_tokens == 12
    assert b.block_ids[:3] == a.block_ids[:3]
    engine.finish(a.request)
    engine.finish(b.request)
    pool = engine.blocks.pool
    assert pool.num_used == engine.blocks.radix.num_blocks  # only the cache holds blocks


def test_prefix_cache_off_computes_everything(make_engine, prompt):
    engine = make_engine(enable_prefix_cache=False)
    engine.finish(engine.prefill(prompt, NO_EOS).request)
    again = engine.prefill(prompt, NO_EOS)
    assert again.num_cached_tokens == 0
    engine.finish(again.request)
    assert engine.blocks.pool.num_free == engine.blocks.pool.num_blocks
