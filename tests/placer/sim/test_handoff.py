"""The simulator's handoff replays the executor's: the same batches, timed along the same messages.

Part one drives the executor's `HandoffSession` through an event replay of the messages of
`executor.roles.rld` / `executor.roles.md` (MainReady, HandoffTokens, HandoffAck; RLD's tokens
at its step times) and checks that `plan_handoff` times the same batches at the same moments.
Part two checks `plan_handoff`'s timing on small cases computed by hand.
"""

from __future__ import annotations

import heapq
import itertools

import pytest

from executor.handoff import HandoffPolicy, HandoffSession
from placer.pdd import CATCH_UP, DEFAULT_CATCH_UP, ONE_SHOT, TOKEN_ID_BYTES, CatchUpRule
from placer.sim.handoff import plan_handoff

ONE_WAY, BACK, RATE = 0.02, 0.025, 1e6  # s, s, line bytes/s


def _extend(k: int) -> float:
    return 0.004 + 2e-5 * k


def _executor_replay(mode, pending, step, rule, phase):
    """The executor's handoff as events: (batches RLD sent, RLD's stop, the final batch at MD).

    RLD's output index j > ``pending`` is produced at (j - pending - phase) · step; MD holds
    the KV at 0 and sends MainReady; RLD answers MainReady and each HandoffAck with its
    session's next batch; MD extends a batch and acks it unless it is final."""
    session = HandoffSession(HandoffPolicy(mode=mode, catch_up=rule), pending_tokens=pending)

    def produced_upto(now: float) -> int:
        j = pending
        while (j + 1 - pending - phase) * step <= now + 1e-9:
            j += 1
        return j

    seq = itertools.count()
    events = [(BACK, next(seq), "MainReady at RLD", None)]
    sent, rld_stop = [], None
    while events:
        now, _, what, batch = heapq.heappop(events)
        if what in ("MainReady at RLD", "HandoffAck at RLD"):
            upto = produced_upto(now)
            out = session.start(upto) if what == "MainReady at RLD" else session.on_ack(upto)
            sent.append(out)
            if out.final:
                rld_stop = now
            wire = ONE_WAY + out.num_tokens * TOKEN_ID_BYTES / RATE
            heapq.heappush(events, (now + wire, next(seq), "HandoffTokens at MD", out))
        else:  # MD: one extend-decode over the batch (an empty first one still forwards t0)
            work = _extend(batch.num_tokens) if batch.num_tokens else (_extend(1) if batch.round == 1 else 0.0)
            if batch.final:
                return sent, rld_stop, now, work
            heapq.heappush(events, (now + work + BACK, next(seq), "HandoffAck at RLD", None))
    raise AssertionError("the replay ended without a final batch")


RULES = [DEFAULT_CATCH_UP, CatchUpRule(final_batch_tokens=0, max_rounds=3), CatchUpRule(final_batch_tokens=20,
                                                                                         max_rounds=8)]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"final<={r.final_batch_tokens},max{r.max_rounds}")
@pytest.mark.parametrize("step_per_one_way", [0.01, 0.3, 1.0, 4.0])  # many tokens per round … fewer than one
@pytest.mark.parametrize("pending", [0, 5, 100, 3000])
@pytest.mark.parametrize("mode", [ONE_SHOT, CATCH_UP])
@pytest.mark.parametrize("phase", [0.0, 0.6])
def test_the_simulator_times_the_batches_the_executor_sends(mode, pending, step_per_one_way, rule, phase):
    step = step_per_one_way * ONE_WAY
    sent, rld_stop, final_at_md, final_work = _executor_replay(mode, pending, step, rule, phase)
    plan = plan_handoff(mode, pending, ONE_WAY, RATE, step, _extend, rule=rule, back_one_way_s=BACK, rld_phase=phase)
    assert list(plan.batches) == sent  # the same sizes, final flags and rounds, in order
    assert plan.rounds == len(sent) <= (1 if mode == ONE_SHOT else rule.max_rounds)
    assert plan.rld_stop_s == pytest.approx(rld_stop)
    assert plan.takeover_s == pytest.approx(final_at_md)
    assert plan.gap_s == pytest.approx(final_at_md - rld_stop + final_work)


def test_the_cases_reach_both_ends_of_the_catch_up_rule():
    # the parametrised cases above end catch-up both by the final-batch threshold and by the round cap
    ends = set()
    for pending, ratio, rule in itertools.product([0, 5, 100, 3000], [0.01, 0.3, 1.0, 4.0], RULES):
        last = plan_handoff(CATCH_UP, pending, ONE_WAY, RATE, ratio * ONE_WAY, _extend, rule=rule,
                            back_one_way_s=BACK).batches[-1]
        ends.add("few left" if last.num_tokens <= rule.final_batch_tokens else "round cap")
        assert last.num_tokens <= rule.final_batch_tokens or last.round == rule.max_rounds
    assert ends == {"few left", "round cap"}


# --- timing on hand-computed cases -----------------------------------------------------

def test_one_shot_sends_what_rld_made_until_main_ready_and_pauses_for_its_crossing_and_extend():
    # MainReady reaches RLD at 10 ms: 10 + ⌊10/4⌋ = 12 tokens, sent at once (the line's rate
    # is unbounded: one way, 10 ms); MD extends them (12 ms) and streams on
    plan = plan_handoff(ONE_SHOT, 10, 0.010, 0.0, 0.004, lambda k: 0.001 * k)
    assert [(b.first_index, b.last_index, b.final) for b in plan.batches] == [(1, 12, True)]
    assert plan.rld_stop_s == pytest.approx(0.010)
    assert plan.takeover_s == pytest.approx(0.020)
    assert plan.md_extend_s == plan.final_extend_s == pytest.approx(0.012)
    assert plan.gap_s == pytest.approx(0.010 + 0.012)
    assert plan.rounds == 1


def test_catch_up_rounds_cost_a_crossing_an_extend_and_the_ack_back():
    # one way 10 ms, back 20 ms, 1 ms per token ID on the line, a token every 10 ms,
    # extend 2 ms + 0.5 ms per token; the default rule (final at <= 8 unsent, round 4 at most)
    plan = plan_handoff(CATCH_UP, 40, 0.010, TOKEN_ID_BYTES / 0.001, 0.010, lambda k: 0.002 + 0.0005 * k,
                        back_one_way_s=0.020)
    # MainReady at 20 ms: tokens 1..42 (40 + 2). They reach MD at 20+10+42 = 72 ms; extend 23 ms;
    # the ack is back at 115 ms: 40 + 11 = 51 produced, 9 unsent > 8: 43..51. They reach MD at
    # 134 ms; extend 6.5 ms; the ack is back at 160.5 ms: 56 produced, 5 unsent: final 52..56,
    # RLD stops; MD has them at 175.5 ms and extends 4.5 ms
    assert [(b.first_index, b.last_index, b.final) for b in plan.batches] == [(1, 42, False), (43, 51, False),
                                                                              (52, 56, True)]
    assert plan.rounds == 3
    assert plan.rld_stop_s == pytest.approx(0.1605)
    assert plan.takeover_s == pytest.approx(0.1755)
    assert plan.md_extend_s == pytest.approx(0.023 + 0.0065 + 0.0045)
    assert plan.final_extend_s == pytest.approx(0.0045)
    assert plan.gap_s == pytest.approx(0.015 + 0.0045)


def test_catch_up_stops_at_the_round_cap_when_rld_keeps_pace():
    # a token every ms and 20 ms per round trip: never few enough left; round 2 is the last
    plan = plan_handoff(CATCH_UP, 0, 0.010, 0.0, 0.001, lambda k: 0.0, rule=CatchUpRule(8, 2))
    assert [(b.first_index, b.last_index, b.final) for b in plan.batches] == [(1, 10, False), (11, 30, True)]
    assert (plan.rld_stop_s, plan.takeover_s, plan.gap_s) == pytest.approx((0.030, 0.040, 0.010))


def test_an_empty_first_batch_still_costs_md_one_pass_over_t0():
    # RLD decoded nothing beyond t0 and makes no token before MainReady: an empty final batch,
    # and MD forwards t0 to predict the next token
    plan = plan_handoff(ONE_SHOT, 0, 0.010, 1e6, 1.0, lambda k: 0.003 * k)
    assert plan.batches[0].num_tokens == 0 and plan.batches[0].final
    assert plan.gap_s == pytest.approx(0.010 + 0.003)


def test_rld_part_way_through_a_step_makes_its_next_token_sooner():
    # 0.9 of a 100 ms step done when MD holds the KV: the next token lands at 10 ms, before MainReady (20 ms)
    assert plan_handoff(ONE_SHOT, 5, 0.020, 0.0, 0.1, lambda k: 0.0).batches[0].last_index == 5
    assert plan_handoff(ONE_SHOT, 5, 0.020, 0.0, 0.1, lambda k: 0.0, rld_phase=0.9).batches[0].last_index == 6


def test_catch_up_leaves_a_smaller_pause_than_one_shot_and_holds_rld_longer():
    one = plan_handoff(ONE_SHOT, 300, 0.015, 1e7, 0.02, _extend)
    catch = plan_handoff(CATCH_UP, 300, 0.015, 1e7, 0.02, _extend)
    assert 0 < catch.gap_s < one.gap_s
    assert catch.rld_stop_s > one.rld_stop_s and catch.takeover_s > one.takeover_s
