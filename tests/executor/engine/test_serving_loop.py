"""The continuous-batching loop (submit/step) gives the tokens a lone request gets."""

import subprocess
import sys

import pytest

from executor.engine import OutOfBlocksError, SamplingParams

NO_EOS = SamplingParams(max_new_tokens=12, stop_at_eos=False)


def test_batched_serving_matches_one_request_at_a_time(make_engine, prompt):
    prompts = [prompt, prompt[:11], [256, *b"jumps over"], prompt[:16] + [3, 4], [256, 65]]
    served = make_engine(num_blocks=14, max_running_requests=3).generate_batch(prompts, NO_EOS)
    alone = make_engine()
    assert served == [alone.generate(p, 12, NO_EOS) for p in prompts]


def test_step_admits_new_requests_between_decode_steps(make_engine, prompt):
    engine = make_engine()
    first = engine.submit(prompt, NO_EOS)
    only_first = [engine.step()[0][0] is first for _ in range(3)]  # prefill, 2 decode steps
    second = engine.submit(prompt[:12] + [1, 2], NO_EOS)
    batch_tokens = engine.step()
    assert only_first == [True, True, True]
    assert [r for r, _ in batch_tokens] == [second]  # joined while `first` is mid-decode
    assert second.num_cached_tokens == 12  # ... and reused first's prompt blocks
    assert {r for r, _ in engine.step()} == {first, second}  # then they decode together
    while engine.scheduler.has_work():
        engine.step()
    assert first.output_ids == make_engine().generate(prompt, 12, NO_EOS)
    pool = engine.blocks.pool
    assert pool.num_used == engine.blocks.radix.num_blocks  # finished requests left only cache


def test_role_operation_out_of_blocks_raises_typed_error_and_leaks_nothing(make_engine, prompt):
    engine = make_engine(num_blocks=5)
    with pytest.raises(OutOfBlocksError):
        engine.prefill(prompt)  # 23 tokens need 6 blocks of 4
    assert engine.blocks.pool.num_free == 5


def test_policy_modules_do_not_import_torch():
    code = (
        "import sys\n"
        "import executor, executor.engine\n"
        "import executor.engine.block_pool, executor.engine.radix_cache, executor.engine.kv_manager\n"
        "import executor.engine.scheduler, executor.engine.request, executor.engine.config\n"
        "import executor.engine.tokenizer\n"
        "bad = sorted(m for m in ('torch', 'ray', 'triton') if m in sys.modules)\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
