"""Handoff mode choice and the batches RLD sends (pure)."""

from __future__ import annotations

import pytest

from executor.handoff import HandoffMode, HandoffPolicy, HandoffSession
from placer.pdd import DEFAULT_CATCH_UP, CatchUpRule, HandoffProtocol
from placer.plan import Plan


def test_adaptive_uses_catch_up_only_above_the_threshold():
    policy = HandoffPolicy(mode="adaptive", catch_up_threshold_tokens=64)
    assert policy.choose(64) is HandoffMode.ONE_SHOT
    assert policy.choose(65) is HandoffMode.CATCH_UP
    assert HandoffPolicy(mode="one-shot").choose(1000) is HandoffMode.ONE_SHOT
    assert HandoffPolicy(mode="catch-up").choose(0) is HandoffMode.CATCH_UP


def test_policy_comes_from_the_plan():
    plan = Plan.model_validate({"scenario": "s", "pools": [], "handoff": {"mode": "adaptive",
                                                                          "catch_up_threshold_tokens": 32}})
    assert HandoffPolicy.from_plan(plan) == HandoffPolicy("adaptive", 32, DEFAULT_CATCH_UP)
    # JSON is parsed at the executor's edge: the policy takes a typed plan only
    with pytest.raises(TypeError, match="Plan.model_validate"):
        HandoffPolicy.from_plan({"handoff": {"mode": "one-shot"}})
    with pytest.raises(ValueError, match="mode"):
        HandoffPolicy(mode="sometimes")
    with pytest.raises(ValueError, match="CatchUpRule"):
        HandoffPolicy(catch_up=8)


def test_the_session_is_pdds_protocol_under_the_policys_rule():
    rule = CatchUpRule(final_batch_tokens=3, max_rounds=5)
    s = HandoffSession(HandoffPolicy(mode="catch-up", catch_up=rule), pending_tokens=100)
    assert isinstance(s, HandoffProtocol) and s.rule is rule and s.mode is HandoffMode.CATCH_UP
    with pytest.raises(ValueError, match="ack before the first batch"):
        s.on_ack(100)


def test_one_shot_sends_everything_at_once_and_stops():
    s = HandoffSession(HandoffPolicy(mode="one-shot"), pending_tokens=30)
    b = s.start(produced_upto=30)
    assert (b.first_index, b.last_index, b.final, b.num_tokens) == (1, 30, True, 30)
    with pytest.raises(ValueError, match="already sent its final batch"):
        s.on_ack(31)


def test_catch_up_sends_what_was_produced_meanwhile_until_few_are_left():
    s = HandoffSession(HandoffPolicy(mode="catch-up", catch_up=CatchUpRule(4, 10)), pending_tokens=100)
    first = s.start(produced_upto=100)
    assert (first.first_index, first.last_index, first.final) == (1, 100, False)
    second = s.on_ack(produced_upto=112)  # 12 more tokens during the round trip
    assert (second.first_index, second.last_index, second.final) == (101, 112, False)
    last = s.on_ack(produced_upto=115)  # 3 left: the last, final batch
    assert (last.first_index, last.last_index, last.final, last.round) == (113, 115, True, 3)


def test_catch_up_ends_after_max_rounds_even_if_rld_keeps_pace():
    s = HandoffSession(HandoffPolicy(mode="catch-up", catch_up=CatchUpRule(0, 3)), pending_tokens=100)
    s.start(10)
    assert not s.on_ack(20).final
    assert s.on_ack(30).final  # round 3


def test_a_relay_without_kv_hands_over_an_empty_final_batch():
    s = HandoffSession(HandoffPolicy(mode="catch-up"), pending_tokens=0)
    b = s.start(produced_upto=-1)
    assert b.final and b.num_tokens == 0 and b.first_index == 1
