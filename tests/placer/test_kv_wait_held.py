"""The KV-wait law of a plan's decode pool holds the requests its batch law holds (issue 42: rnd-7-17 and rnd-7-37's
dc-a H800 decoders): by Little's law a class holds λ × output × the mean step its tokens see (the batch law's, B ÷
tokens/s), not × the step at the mean batch — a step that grows with the batch is longer on average than at its mean
batch, and rnd-7-17's pool held 1.3 % fewer requests in the KV law (57.8) than in its batch law (58.6): 76.0 % of its
KV and 19.1 % of arrivals waiting 5.95 s, where the simulator's decoder alone over 2 × 1,700 stays held 58.7 requests,
77.5 %, and 22.1 % waited 6.86 s (now 58.6, 77.0 %, 21.1 %, 6.29 s)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from placer.decode_state import DecodeState, _settle_batch
from placer.flows import class_footprint_tokens
from placer.kv_wait import kv_wait_law
from placer.plan import PoolKey

# rnd-7-17's dc-a MD classes (prompt, output) and their req/s there
CLASSES = [(SimpleNamespace(name="c0", input_tokens=21423, output_tokens=1608), 0.715),
           (SimpleNamespace(name="c2", input_tokens=47127, output_tokens=1487), 0.447),
           (SimpleNamespace(name="c3", input_tokens=10166, output_tokens=699), 0.294),
           (SimpleNamespace(name="c4", input_tokens=4474, output_tokens=432), 0.512)]
CAPACITY = 2_109_052.0


def _pool() -> DecodeState:
    """One decoder of rnd-7-17's dc-a MD pool's load, on a step of 4.4 ms fixed + 0.37 ms per sequence (its H800's
    0.0258 s at batch 58.6 and its fixed share, 0.21)."""
    im = SimpleNamespace(batch_cap=4096, kv_capacity_tokens=CAPACITY,
                         step_s=lambda b, ctx: 0.0054 + 0.000347 * b)
    st = DecodeState(count=1, im=im)
    for c, rate in CLASSES:
        tokens = rate * c.output_tokens
        st.kv_items.append((rate, c, None))
        st.tokens_per_s += tokens
        st.first_tokens_per_s += rate
        st.context_weighted += tokens * (c.input_tokens + c.output_tokens / 2)
        st.context_sq_weighted += tokens * (c.input_tokens + c.output_tokens / 2) ** 2
    _settle_batch(SimpleNamespace(tpot_s=1.0), PoolKey("MD", "dc-a", "H800-SXM", 4), st, [])
    return st


def _law(st: DecodeState, step_s: float) -> tuple[float, float]:
    return kv_wait_law(CAPACITY, [(rate, rate * c.output_tokens * step_s, class_footprint_tokens(c))
                                  for c, rate in CLASSES], st.fixed_share)


def test_the_kv_wait_law_holds_the_batch_laws_requests():
    st = _pool()
    held = sum(rate * c.output_tokens * st.seen_step_s for c, rate in CLASSES)
    assert held == pytest.approx(st.batch, rel=1e-6)  # Little: the batch law's mean batch
    assert st.seen_step_s > st.step_s * 1.005  # the mean step a token sees is past the step at the mean batch
    assert (st.kv_wait, st.kv_wait_s) == pytest.approx(_law(st, st.seen_step_s), rel=1e-9)
    assert st.kv_wait > _law(st, st.step_s)[0] * 1.03  # what the step at the mean batch priced: fewer held, fewer wait
