"""PDD's rules and flow physics in placer.flows: the filter, the handoff, KV over the WAN,
RLD's eager tokens, the P queue laws and the TTFT mixture quantile."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from placer.flows import Route, eager_tokens, instance
from placer.p_queues import mixture_quantile, packed_wait_law
from placer.pdd import CATCH_UP, DEFAULT_FILTER, ONE_SHOT, P_D, P_MD, P_RLD, P_RLD_MD, FilterRule, handoff_mode
from placer.queueing import WaitModel
from placer.problem import resolve
from placer.specs import parse_scenario

from tests.placer.conftest import micro_dict


def test_the_filter_takes_long_cold_short_requests_only():
    assert DEFAULT_FILTER.is_filtered(input_tokens=8192, hit_rate=0.4, output_tokens=100)
    assert not DEFAULT_FILTER.is_filtered(8191, 0.4, 100)  # input too short
    assert not DEFAULT_FILTER.is_filtered(8192, 0.5, 100)  # hit too high
    assert not DEFAULT_FILTER.is_filtered(8192, 0.4, 500)  # output too long
    assert FilterRule(min_input_tokens=1024).is_filtered(2048, 0.4, 100)


def test_a_scenario_flags_its_classes_with_its_filter_options(micro_problem):
    assert [c.name for c in micro_problem.classes if c.filterable] == ["odd"]  # 16k input, 10 % hit, 128 out
    strict = resolve(parse_scenario(micro_dict(options={"tp_degrees": [1, 2], "filter_min_input_tokens": 32768})))
    assert not any(c.filterable for c in strict.classes)


def test_adaptive_handoff_catches_up_above_the_threshold_only():
    assert handoff_mode("adaptive", 65, 64) == CATCH_UP and handoff_mode("adaptive", 64, 64) == ONE_SHOT
    assert handoff_mode("one-shot", 1000, 64) == ONE_SHOT
    assert handoff_mode("catch-up", 0) == CATCH_UP
    assert handoff_mode("adaptive", 65) == CATCH_UP  # the default threshold is 64
    with pytest.raises(ValueError, match="handoff mode"):
        handoff_mode("eager", 10)


def test_eager_tokens_are_at_least_one_and_at_most_the_output():
    assert eager_tokens(0.001, 500, step_s=0.05) == 1.0
    assert eager_tokens(1.0, 500, step_s=0.05) == 20.0
    assert eager_tokens(100.0, 500, step_s=0.05) == 500.0
    assert eager_tokens(math.inf, 500, step_s=0.05) == 500.0  # no line: RLD decodes it all


def test_the_decode_side_cache_sends_only_the_uncached_kv(micro_problem):
    hot = micro_problem.classes[0]  # 16384 tokens, 95 % hit
    kv = micro_problem.kv_bytes_per_token
    def route(pipeline, dst, drc):
        return Route(micro_problem, hot, pipeline, "dc-a", dst, drc)

    assert route(P_MD, "dc-b", drc=False).wan_bytes() == 16384 * kv
    assert route(P_MD, "dc-b", drc=True).wan_bytes() == pytest.approx(0.05 * 16384 * kv)
    with_drc = route(P_MD, "dc-b", drc=True).wan_s(0.5)
    without = route(P_MD, "dc-b", drc=False).wan_s(0.5)
    assert with_drc < without
    # plain PD has no decode-side cache, whatever the scenario says
    assert route(P_D, "dc-b", drc=True).wan_bytes() == 16384 * kv
    assert route(P_D, "dc-b", drc=True).wan_s(0.5) == without
    assert route(P_MD, "dc-c", drc=True).wan_s(0.5) == math.inf  # no line


def test_p_keeps_the_kv_until_every_transfer_it_feeds_is_done(micro_problem):
    cold = micro_problem.classes[1]
    im = instance(micro_problem, "H100-SXM", 1)
    relayed = Route(micro_problem, cold, P_RLD_MD, "dc-a", "dc-b", True, im)
    filtered = Route(micro_problem, cold, P_RLD, "dc-a", "dc-a", True, im)
    to_rld, over_wan = relayed.first_kv_s(0.5), relayed.wan_s(0.5)
    assert to_rld < over_wan  # RLD starts long before the KV reaches MD ...
    assert relayed.staged_kv_s(0.5) == over_wan  # ... which P waits for
    assert filtered.staged_kv_s(0.5) == filtered.first_kv_s(0.5)
    assert Route(micro_problem, cold, P_MD, "dc-a", "dc-b", True, im).first_kv_s(0.5) == over_wan


def test_packing_short_prompts_shortens_the_wait(micro_problem):
    im = instance(micro_problem, "H100-SXM", 1)
    alone = im.prefill_s(1000, 0.0)
    rps = 0.7 / alone
    short = packed_wait_law([(rps, alone, 1000.0)], 1, im)
    long_ = packed_wait_law([(rps, alone, float(im.prefill_chunk_tokens))], 1, im)  # nothing rides along
    assert long_.rho == pytest.approx(0.7)
    assert short.rho < long_.rho and short.mean_wait_s < long_.mean_wait_s
    assert packed_wait_law([(rps, alone, 1000.0)], 0, im).rho == 1.0  # load without instances: overloaded


def test_the_mixture_quantile_weighs_flows_by_their_rates():
    idle = WaitModel(0.0, 1.0, 1.0)
    fast, slow = SimpleNamespace(rps=9.0, det_s=1.0, wait=idle), SimpleNamespace(rps=1.0, det_s=5.0, wait=idle)
    assert mixture_quantile([fast, slow], 0.5) == pytest.approx(1.0)
    assert mixture_quantile([fast, slow], 0.95) == pytest.approx(5.0)
    assert mixture_quantile([], 0.9) == 0.0


def test_rld_relays_one_token_per_step_of_its_own_batch_for_the_whole_transfer():
    """A faster RLD step emits more tokens over the same transfer: RLD holds the request until
    the KV lands, whatever its step (not one token per TPOT)."""
    assert eager_tokens(1.0, 500, step_s=0.01) == 5 * eager_tokens(1.0, 500, step_s=0.05)


def test_a_wan_transfer_spreads_the_ttft_tail_beyond_its_mean():
    """TTFT over a loaded line has a tail: P(late) is higher than with the transfer at its mean."""
    from placer.flows import TtftTail
    from placer.queueing import WaitModel

    wait = WaitModel(0.5, 0.1, 0.02)
    excess = 0.2  # mean slowdown of the transfer
    with_spread = TtftTail(wait, excess)
    at_mean = TtftTail(wait)
    budget = 0.6
    assert with_spread.prob_exceeds(budget) > at_mean.prob_exceeds(budget - excess)
    assert with_spread.prob_exceeds(0.0) == pytest.approx(1.0)
    assert TtftTail(WaitModel(0.0, 0.1, 0.02), excess).prob_exceeds(budget) == pytest.approx(math.exp(-budget / excess))


def test_line_batchmates_count_the_size_biased_forward_and_only_the_share_that_crosses():
    """A request rides along in a queued forward with probability r, so forwards hold K ~ 1 +
    Geometric requests and a request finds E[K²]/E[K] − 1 = 2r/(1 − r) others in its own; only
    the queue's share crossing the line shares the line with it; unpacked queues have none."""
    from placer.flows import line_batchmates
    from placer.queueing import WaitModel

    assert line_batchmates(WaitModel(0.8, 0.1, 0.01), 1.0) == 0.0  # no packing: Poisson arrivals
    r = 0.25
    k_mean = 1 / (1 - r)
    k_second = sum(k * k * (1 - r) * r ** (k - 1) for k in range(1, 400))
    assert line_batchmates(WaitModel(0.8, 0.1, 0.01, ride=r), 1.0) == pytest.approx(k_second / k_mean - 1)
    assert line_batchmates(WaitModel(0.8, 0.1, 0.01, ride=r), 0.5) == pytest.approx(0.5 * 2 * r / (1 - r))


def _moments(tail, horizon_s: float, steps: int = 200_000) -> tuple[float, float]:
    """(E[E], E[E²]) of a tail with an idle P queue, from its survival: ∫P(E>t)dt, 2∫t·P(E>t)dt."""
    dt = horizon_s / steps
    surv = [tail.prob_exceeds((i + 0.5) * dt) for i in range(steps)]
    return sum(surv) * dt, 2 * sum((i + 0.5) * dt * s for i, s in enumerate(surv)) * dt


@pytest.mark.parametrize("var", [0.01, 0.04, 0.16], ids=["concentrated", "exponential", "mostly-idle"])
def test_the_line_excess_keeps_its_mean_and_variance_whatever_its_spread(var):
    """The two-moment law of the transfer's excess (shifted exponential below an exponential's
    spread, an atom at 0 plus an exponential above it) has the mean and variance it is given."""
    from placer.flows import TtftTail

    mean = 0.2
    tail = TtftTail(WaitModel(0.0, 0.1, 0.02), mean, var)
    first, second = _moments(tail, 8.0)
    assert first == pytest.approx(mean, rel=1e-3)
    assert second - first ** 2 == pytest.approx(var, rel=1e-2)


def test_a_concentrated_excess_is_never_below_its_shift_and_none_is_the_exponential():
    from placer.flows import TtftTail

    wait = WaitModel(0.5, 0.1, 0.02)
    concentrated = TtftTail(WaitModel(0.0, 0.1, 0.02), 0.2, 0.01)  # sd 0.1: shift 0.1
    assert concentrated.prob_exceeds(0.099) == 1.0 and concentrated.prob_exceeds(0.2) < 1.0
    assert TtftTail(wait, 0.2).prob_exceeds(0.7) == pytest.approx(TtftTail(wait, 0.2, 0.04).prob_exceeds(0.7))
    # with the P queue's wait on top, a tighter excess makes a P90 budget's miss rarer
    assert TtftTail(wait, 0.2, 0.01).prob_exceeds(0.9) < TtftTail(wait, 0.2).prob_exceeds(0.9)


def test_only_a_prompt_shorter_than_a_chunk_has_batch_mates_on_the_line(micro_problem):
    """P packs only prompts of fewer than a chunk's new tokens into one forward: the hot class
    (819 new tokens) leaves P with batch-mates, the odd one (14746) alone, packed queue or not."""
    im = instance(micro_problem, "H100-SXM", 1)
    hot, odd = micro_problem.classes[0], micro_problem.classes[2]
    assert (1 - hot.hit_rate) * hot.input_tokens < im.prefill_chunk_tokens <= (1 - odd.hit_rate) * odd.input_tokens
    packed, plain = WaitModel(0.6, 0.1, 0.02, ride=0.3), WaitModel(0.6, 0.1, 0.02)

    def excess(c, wait):
        return Route(micro_problem, c, P_MD, "dc-a", "dc-b", True, im).first_token_law(wait, 0.5, 1.0)[1]

    assert excess(hot, packed).wan_excess_mean_s > excess(hot, plain).wan_excess_mean_s
    assert excess(odd, packed).wan_excess_mean_s == excess(odd, plain).wan_excess_mean_s


def test_the_line_mix_gives_the_excess_its_processor_sharing_variance(micro_problem):
    from placer.flows import ps_sojourn_var_s2

    im = instance(micro_problem, "H100-SXM", 1)
    cold = micro_problem.classes[1]
    wait = WaitModel(0.6, 0.1, 0.02)
    route = Route(micro_problem, cold, P_MD, "dc-a", "dc-b", True, im)
    size_s = route.wan_bytes() / micro_problem.links[("dc-a", "dc-b")].bytes_per_s
    assert route.first_token_law(wait, 0.5)[1].wan_excess_var_s2 is None  # the MILP: no mix, exponential
    assert route.first_token_law(wait, 0.5, 0.0, 2.0)[1].wan_excess_var_s2 == pytest.approx(
        ps_sojourn_var_s2(size_s, 0.5, 2.0))
