"""The decode batch law's step over the batch's contexts (issue 48): a step is not linear in its context, so a
batch's step is averaged over which sequences it holds, not read at the pool's mean context."""

from __future__ import annotations

import math

import pytest

from placer.decode_state import _context_sq, batch_law, composed_step


def _step(n: float, ctx: float) -> float:
    # concave in the context as the bench's CPU table at batch 2 (7.7 ms at 300, 19.5 at 800, 36 at 2,000)
    return 0.001 * n * math.sqrt(ctx)


def test_a_batch_of_one_mixing_two_contexts_steps_at_their_mean_step():
    # pdd's MD: half its tokens at context 523, half at 1,804 (mean 1,163.5, spread 640.5)
    mean, spread = 1163.5, 640.5
    assert composed_step(_step, 1, mean, spread) == pytest.approx((_step(1, 523) + _step(1, 1804)) / 2)
    assert composed_step(_step, 1, mean, spread) < _step(1, mean)  # the step at the mean context overcharges
    # larger batches average more sequences: their mean context spreads less (÷ √n)
    gap = [_step(n, mean) - composed_step(_step, n, mean, spread) for n in (1, 4, 16)]
    assert gap[0] > gap[1] / 4 > gap[2] / 16 > 0
    assert composed_step(_step, 3, mean, 0.0) == _step(3, mean)


def test_the_batch_law_settles_lower_on_the_composed_step():
    mean, spread = 1163.5, 640.5
    at_mean, _ = batch_law(40.0, lambda n: _step(n, mean) * 0.3, 64)
    composed, _ = batch_law(40.0, lambda n: composed_step(_step, n, mean, spread) * 0.3, 64)
    batch = lambda probs: sum(n * p for n, p in enumerate(probs))
    assert batch(composed) < batch(at_mean)


def test_a_requests_tokens_spread_over_its_growing_context():
    # context 100 → 400 over 300 tokens: uniform, E[c²] = 250² + 300² / 12
    assert _context_sq(100, 300) == pytest.approx(250 ** 2 + 300 ** 2 / 12)
