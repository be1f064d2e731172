"""Extend-decode: k tokens in one forward equal k single decode steps."""

import pytest
import torch

from executor.engine import SamplingParams

NO_EOS = SamplingParams(max_new_tokens=64, stop_at_eos=False)


@pytest.mark.parametrize("k", [1, 3, 9])
def test_extend_equals_decode_steps(make_engine, prompt, k):
    stepper, extender = make_engine(), make_engine()
    a = stepper.prefill(prompt, NO_EOS).request
    b = extender.prefill(prompt, NO_EOS).request
    stepped = [stepper.decode_step([a])[0] for _ in range(k)]  # t1..tk

    # b still has t0 pending; given t1..t(k-1), one forward over k tokens yields tk.
    result = extender.extend(b, stepped[:-1])
    assert result.num_forwarded == k
    assert result.next_token == stepped[-1]
    assert result.logits.argmax(-1).tolist() == stepped  # row i predicts t(i+1)
    assert b.token_ids == a.token_ids and b.num_kv_tokens == a.num_kv_tokens
    ka, kb = stepper.export_kv(a, 0, a.num_kv_tokens), extender.export_kv(b, 0, b.num_kv_tokens)
    torch.testing.assert_close(kb.k, ka.k, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kb.v, ka.v, rtol=1e-5, atol=1e-5)
    after_a = [stepper.decode_step([a])[0] for _ in range(5)]
    after_b = [extender.decode_step([b])[0] for _ in range(5)]
    assert after_a == after_b


def test_decode_step_batches_requests_of_different_lengths(make_engine, prompt):
    engine, solo = make_engine(), make_engine()
    reqs = [engine.prefill(p, NO_EOS).request for p in (prompt, prompt[:9], prompt[3:])]
    batched = [engine.decode_step(reqs) for _ in range(6)]
    for i, p in enumerate((prompt, prompt[:9], prompt[3:])):
        alone = solo.generate(p, 7, NO_EOS)
        assert [step[i] for step in batched] == alone[1:]


def test_decode_step_rejects_requests_with_several_pending_tokens(make_engine, prompt):
    engine = make_engine()
    req = engine.prefill(prompt, NO_EOS).request
    req.token_ids.append(5)
    with pytest.raises(ValueError, match="2 pending tokens"):
        engine.decode_step([req])
    engine.finish(req)
    with pytest.raises(ValueError, match="not running"):
        engine.extend(req, [1])
