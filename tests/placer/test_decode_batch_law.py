"""The planner's decode batch (placer.evaluate._settle_batch): each request's own steps run with it in the batch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from placer.evaluate import DecodeState, _settle_batch


class _Linear:
    """A decoder whose step costs ``c`` seconds per sequence and nothing else (the bench model's: its attention
    reads 32 KiB of KV per token and dominates)."""

    batch_cap = 256
    kv_capacity_tokens = 1e9

    def __init__(self, c: float) -> None:
        self.c = c

    def step_s(self, batch: float, context_tokens: float) -> float:
        return self.c * batch


@pytest.mark.parametrize("rho", [0.31, 0.6])
def test_a_light_decoder_holds_the_processor_sharing_number_and_a_request_sees_one_more(rho):
    """ρ = tokens/s × c: an M/G/1 processor-sharing queue holds ρ / (1 - ρ) requests on average and a request's
    token takes c / (1 - ρ). The law B = tokens/s × step(B) found no batch below saturation (B = ρ·B: clamped
    to 1), so the plan's TPOT was c·(ρ + 1) — the bench's cross-dc decoder, ρ = 0.31: 6.9 ms for 7.8."""
    c = 0.00541
    st = DecodeState(count=1, im=_Linear(c), tokens_per_s=rho / c, context_weighted=1000 * rho / c)
    _settle_batch(SimpleNamespace(tpot_s=1.0), None, st, [])
    assert st.seen_step_s == pytest.approx(c / (1 - rho), rel=1e-3)
    assert st.batch == pytest.approx(max(1.0, rho / (1 - rho)), rel=1e-3)
