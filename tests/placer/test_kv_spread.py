"""A decoder's KV occupancy with its classes' spreads (issue 42, rnd-7-39-trace's fitted classes keep their prompt
tails): a request reserves its whole prompt + output, so a class whose prompts spread holds KV that spreads too, and
the held KV's variance is a compound Poisson's, Σ L·E[f²] (time-weighted: Σ p·O·f² / Σ p·O), not Σ L·E[f]². The
evaluation's waiting law (:meth:`placer.decode_state.DecodeState.kv_load`) and the MILP's KV row
(:func:`placer.flows.class_kv_weight`) take the class's footprint points over its prompt and output spreads."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from placer.decode_state import DecodeState
from placer.flows import class_footprint_tokens, class_kv_weight, footprint_points
from placer.kv_admission import KvHeadroom, footprint_tokens, kv_occupancy_variance
from placer.kv_wait import kv_wait_law
from placer.problem import Class
from tests.placer.test_kv_line_law import CAPACITY, FIXED_S, _waited
from tests.placer.sim.test_engine import _Loop, _req

PROMPT, OUTPUT, PROMPT_CV2 = 4096, 512, 3.0  # a trace class's long prompt tail: new-token cv² 3


def _class(prompt_cv2: float = PROMPT_CV2, output_cv2: float = 0.0) -> Class:
    return Class("tail", 1.0, PROMPT, OUTPUT, 0.0, False, new_tokens_cv2=prompt_cv2, output_tokens_cv2=output_cv2)


def _pool(c: Class, rate: float, step_s: float) -> DecodeState:
    st = DecodeState(count=1, im=SimpleNamespace(kv_capacity_tokens=CAPACITY))
    st.kv_items.append((rate, c, None))
    st.seen_step_s = step_s
    return st


def test_a_class_without_spread_is_priced_as_before():
    c = _class(0.0, 0.0)
    f = footprint_tokens(PROMPT, OUTPUT)
    assert footprint_points(c) == [(1.0, OUTPUT, f)]
    assert _pool(c, 2.0, 0.03).kv_load() == [(2.0, 2.0 * OUTPUT * 0.03, f)]  # bit-identical: one point, the mean
    row = KvHeadroom(CAPACITY, 1.64, 20_000.0, common_tokens=3_000.0)
    assert class_kv_weight(row, c) == row.weight(f)


def test_the_occupancy_variance_takes_the_prompts_second_moment():
    c = _class()
    rate, step_s = 2.0, 0.03
    held = rate * OUTPUT * step_s
    # closed form: E[f²] = (E[I] + O)² + Var I, the prompt's variance its new tokens' (no cached prefix here)
    second = (PROMPT + OUTPUT) ** 2 + PROMPT_CV2 * PROMPT ** 2
    law = kv_occupancy_variance(_pool(c, rate, step_s).kv_load())
    assert law == pytest.approx(held * second, rel=0.01)  # within the blocks' rounding
    assert law > 3.0 * held * class_footprint_tokens(c) ** 2  # the mean squared missed most of it
    # the MILP's row: its quadratic term over the same second moment
    row = KvHeadroom(CAPACITY, 1.64, 20_000.0)
    mean = class_footprint_tokens(c)
    assert class_kv_weight(row, c) == pytest.approx(mean + 1.64 * second / (2 * 20_000.0), rel=0.01)


def test_a_decoder_of_long_tailed_prompts_waits_as_the_law_says():
    """The simulator's decoder (flat step) fed a class of lognormal prompts (cv² 3) at 85 % of its KV: 36.7 % of
    arrivals wait, the law over the class's footprint points 39.4 %, at its mean footprint (the old law) 15.1 %. (Over
    fills 75-92 %, φ 1 and 0.7, cv² 1 and 3: within 3.6 points, the old law 6-22 points short; the wait itself reads
    5-56 % short, most where the step is flat and the fill low: those who wait are the long prompts.)"""
    from placer.sim.decode import DecodeInstance
    from placer.sim.metrics import TimeSeries
    import heapq

    c, fill, n = _class(), 0.85, 100_000
    rate = CAPACITY * fill / (OUTPUT * FIXED_S * class_footprint_tokens(c))
    im = SimpleNamespace(batch_cap=1 << 30, kv_capacity_tokens=CAPACITY, step_s=lambda b, ctx: FIXED_S)
    loop, rng, t, arrived = _Loop(), random.Random(3), 0.0, []
    dec = DecodeInstance(loop, im, "MD", None, TimeSeries(10, 10))
    sigma = math.sqrt(math.log1p(PROMPT_CV2))
    for rid in range(n):
        t += rng.expovariate(rate)
        req = _req(rid, n_in=max(1, round(PROMPT * rng.lognormvariate(-sigma * sigma / 2, sigma))), n_out=OUTPUT)
        req.t_arr = t
        arrived.append(req)
        heapq.heappush(loop.heap, (t, -rid - 1, lambda tt, r: dec.join(r, tt, r.n_out), req))
    loop.run()
    share, wait_s = _waited(arrived[n // 5:])
    planned_share, planned_wait_s = kv_wait_law(CAPACITY, _pool(c, rate, FIXED_S).kv_load())
    old_share, _ = kv_wait_law(CAPACITY, [(rate, rate * OUTPUT * FIXED_S, class_footprint_tokens(c))])
    assert planned_share == pytest.approx(share, abs=0.08)
    assert old_share < share - 0.15
