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


def test_md_decodes_what_rld_did_not_make():
    """A relayed request's tokens RLD streamed before the handoff are taken in by MD's one extend pass: MD's
    decode load is the output less them (the simulator's MD joins the request with what is left). The bench's
    pdd MD was charged 60 tokens/s where it decoded 48 (RLD made a fifth of the output)."""
    from placer.evaluate import _hand_over
    from placer.pdd import MD, P_RLD_MD, RLD

    from placer.plan import PoolKey

    rld_key, md_key = PoolKey(RLD, "dc-a", "cpu", 1), PoolKey(MD, "dc-b", "cpu", 1)
    new, turn = SimpleNamespace(input_tokens=400, output_tokens=320), SimpleNamespace(input_tokens=500, output_tokens=16)
    rld = DecodeState(count=1, im=_Linear(0.005), seen_step_s=0.01)
    md = DecodeState(count=1, im=_Linear(0.005), tokens_per_s=0.1 * 320 + 0.5 * 16,
                     context_weighted=0.1 * 320 * (400 + 160) + 0.5 * 16 * (500 + 8))
    plan = SimpleNamespace(assignments=[
        SimpleNamespace(role=RLD, pipeline=P_RLD_MD, request_class="new", rps=0.1, key=rld_key),
        SimpleNamespace(role=MD, pipeline=None, request_class="new", rps=0.1, key=md_key),
        SimpleNamespace(role=MD, pipeline=None, request_class="turn", rps=0.5, key=md_key)])
    # RLD holds each relayed request 1 s (the KV's crawl and the handoff): 100 tokens at its 10-ms step
    _hand_over(None, plan, {"new": new, "turn": turn}, {rld_key: rld, md_key: md}, [(0.1, 1.0, 320, rld_key)])
    assert md.tokens_per_s == pytest.approx(0.1 * 220 + 0.5 * 16)
    # the tokens MD decodes run over contexts from 400 + 100 to 400 + 320
    assert md.context_weighted == pytest.approx(0.1 * 220 * (400 + 210) + 0.5 * 16 * (500 + 8))
