"""The planner's decode batch (placer.evaluate._settle_batch): each request's own steps run with it in the batch."""

from __future__ import annotations

import math
import random
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
    _hand_over(None, plan, {"new": new, "turn": turn}, {rld_key: rld, md_key: md}, [(0.1, 1.0, 320, rld_key, "new", "dc-b")])
    assert md.tokens_per_s == pytest.approx(0.1 * 220 + 0.5 * 16)
    # the tokens MD decodes run over contexts from 400 + 100 to 400 + 320
    assert md.context_weighted == pytest.approx(0.1 * 220 * (400 + 210) + 0.5 * 16 * (500 + 8))


def test_two_relayed_classes_of_one_output_length_keep_their_own_eager_tokens():
    """pdd's bench classes new (short prompt: MD has the KV soon, RLD made 23 tokens) and new-long (the KV crawls:
    RLD made 95) both answer 320 tokens. Each class's MD rows lose its own relays' eager tokens — before, a relay
    was matched to every class of its output length, both classes got the mean (59), and MD was charged the long
    prompts' tokens at a longer context than it decodes them (serve18: 1,179 tokens where the simulator's MD
    decoded at 1,059, a token 22.4 ms against the simulator's 19.0-20.2)."""
    from placer.evaluate import _hand_over
    from placer.pdd import MD, P_RLD_MD, RLD

    from placer.plan import PoolKey

    rld_key, md_key = PoolKey(RLD, "dc-a", "cpu", 1), PoolKey(MD, "dc-b", "cpu", 1)
    short, long = SimpleNamespace(input_tokens=400, output_tokens=320), SimpleNamespace(input_tokens=1600, output_tokens=320)
    rld = DecodeState(count=1, im=_Linear(0.005), seen_step_s=0.01)
    md = DecodeState(count=1, im=_Linear(0.005), tokens_per_s=0.1 * 320 * 2,
                     context_weighted=0.1 * 320 * (400 + 160) + 0.1 * 320 * (1600 + 160))
    plan = SimpleNamespace(assignments=[
        SimpleNamespace(role=RLD, pipeline=P_RLD_MD, request_class="new", rps=0.1, key=rld_key),
        SimpleNamespace(role=RLD, pipeline=P_RLD_MD, request_class="new-long", rps=0.1, key=rld_key),
        SimpleNamespace(role=MD, pipeline=None, request_class="new", rps=0.1, key=md_key),
        SimpleNamespace(role=MD, pipeline=None, request_class="new-long", rps=0.1, key=md_key)])
    # RLD holds a short one 0.2 s (20 tokens at its 10-ms step), a long one 1 s (100 tokens)
    _hand_over(None, plan, {"new": short, "new-long": long}, {rld_key: rld, md_key: md},
               [(0.1, 0.2, 320, rld_key, "new", "dc-b"), (0.1, 1.0, 320, rld_key, "new-long", "dc-b")])
    assert md.tokens_per_s == pytest.approx(0.1 * 300 + 0.1 * 220)
    # the short prompt's 300 tokens from 420 to 720, the long one's 220 from 1,700 to 1,920
    assert md.context_weighted == pytest.approx(0.1 * 300 * (400 + 170) + 0.1 * 220 * (1600 + 210))


def _cpu_table_step(batch: float) -> float:
    """The bench's CPU decode step at ~1,000 tokens of context (serve18's profile): 7.1 ms alone, 17.4 ms for two,
    20 ms for four, 41 ms for eight — not linear in the batch; log-interpolated between its points as the table is."""
    points = [(1, 7.1e-3), (2, 17.4e-3), (4, 20e-3), (8, 41e-3), (16, 68e-3)]
    if batch <= 1:
        return points[0][1] * batch
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if batch <= x1:
            f = math.log(batch / x0) / math.log(x1 / x0)
            return math.exp(math.log(y0) + f * math.log(y1 / y0))
    return points[-1][1] * batch / points[-1][0]


def _stepping_decoder(step, arrivals_per_s: float, output_tokens: int, requests: int = 20000) -> float:
    """Seconds per token of a decoder that steps: Poisson arrivals join at the next step's start, each step of n
    requests lasts step(n) and gives each one token; (the requests present, integrated over time) ÷ tokens made."""
    rng = random.Random(7)
    t, arrivals = 0.0, []
    for _ in range(requests):
        t += rng.expovariate(arrivals_per_s)
        arrivals.append(t)
    i, now, left, area = 0, 0.0, [], 0.0
    while i < len(arrivals) or left:
        if not left and arrivals[i] > now:
            now = arrivals[i]
        while i < len(arrivals) and arrivals[i] <= now:
            left.append(output_tokens)
            i += 1
        s = step(len(left))
        area += len(left) * s
        now += s
        left = [n - 1 for n in left if n > 1]
    return area / (requests * output_tokens)


class _Table(_Linear):
    def __init__(self, step) -> None:
        self.step = step

    def step_s(self, batch: float, context_tokens: float) -> float:
        return self.step(batch)


@pytest.mark.parametrize("tokens_per_s", [40.0, 57.6, 80.0])
def test_a_token_takes_the_mean_of_the_steps_its_batch_goes_through_not_the_step_at_the_mean_batch(tokens_per_s):
    """On a table whose step is not linear in the batch (the bench's CPU: two sequences cost 2.4x one), the
    planner's time per token is what a decoder stepping through that table makes: within 3 %. Reading the table
    once, at the mean batch + 1, gave 11.6 / 17.4 / 18.1 ms where the decoder makes 10.2 / 11.7 / 13.8 (serve18:
    the planner's TPOT +36 / +53 / +120 % off the executor's)."""
    st = DecodeState(count=1, im=_Table(_cpu_table_step), tokens_per_s=tokens_per_s,
                     context_weighted=1000 * tokens_per_s)
    _settle_batch(SimpleNamespace(tpot_s=1.0), None, st, [])
    made = _stepping_decoder(_cpu_table_step, tokens_per_s / 16, 16)
    assert st.seen_step_s == pytest.approx(made, rel=0.03)


def test_the_batch_law_is_poisson_where_the_step_does_not_grow_and_overloaded_past_the_caps_rate():
    """A step that costs the same at any batch holds requests as M/G/∞ does (Poisson, mean tokens/s × step); a
    decoder whose full batch makes fewer tokens than arrive is overloaded."""
    from placer.decode_state import batch_law

    probs, overloaded = batch_law(300.0, lambda n: 0.01, 256)
    assert not overloaded
    assert sum(n * p for n, p in enumerate(probs)) == pytest.approx(3.0, rel=1e-6)
    assert probs[0] == pytest.approx(math.exp(-3.0), rel=1e-6)
    assert batch_law(300.0, lambda n: 0.01 * n, 256)[1]  # one token per 10 ms a sequence: 100 tokens/s at most


def test_a_busy_decoder_that_keeps_up_is_not_read_overloaded_where_its_laws_terms_pass_a_float():
    """A step a + c·n holds a negative binomial number (r = a/c + 1, ρ = tokens/s × c; mean r·ρ / (1 − ρ)). At
    22,546 tokens/s, a = 20 ms, ρ = 0.76 the law's unnormalised terms reach e^843 before they turn down, past a
    float's e^709: that read "cannot keep up" though the full batch of 8,192 makes 30 % more tokens than arrive
    (rnd-31-5's MD dc0 MI300X tp8-dep: the plan's figures at the engine's cap, 485 % busy, SLA missed, where the
    simulator served 95 % within the SLA; the law now settles that pool at a batch of 1,359)."""
    from placer.decode_state import batch_law

    tokens_per_s, a, rho = 22_546.0, 0.02, 0.76
    c = rho / tokens_per_s
    assert sum(math.log(tokens_per_s * (a + c * n) / n) for n in range(1, 1900)) > 709  # the float's range, passed
    probs, overloaded = batch_law(tokens_per_s, lambda n: a + c * n, 8192)
    r = a / c + 1
    assert not overloaded
    assert sum(n * p for n, p in enumerate(probs)) == pytest.approx(r * rho / (1 - rho), rel=1e-6)
    assert sum(probs) == pytest.approx(1.0, rel=1e-9)


def test_relays_held_past_the_cap_read_overloaded_not_nan():
    """rnd-7-19-trace priced at its far decoders' hits: a line too slow for the relayed KV had RLD hold 1,540
    requests on a decoder of cap 256 — the law's terms overflowed to NaN and the evaluation crashed."""
    from placer.decode_state import batch_law

    probs, overloaded = batch_law(750.0, lambda n: 0.01 + 0.0005 * n, 256, held=1540.0)
    assert overloaded and probs == [1.0]
    probs, overloaded = batch_law(1e9, lambda n: 1.0 + n, 256)
    assert overloaded and all(math.isfinite(p) for p in probs)
