"""bench_serve's full trace offers a steady load over the whole run; the quick one keeps its first shape (issue 48)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.serve_dry import first_guess, load_by_quarter
from bench.serve_trace import FULL, QUICK, make_trace, think_times, turns_kept


@pytest.mark.parametrize("seed", range(5))
def test_the_full_traces_openings_come_over_the_whole_run_not_its_start(seed):
    """The openings (their 320-token answers: most of the output tokens) span the run: the last opens in its last
    quarter, none of its thirds is without one, and no gap between two is over a third of the run (the first
    shape opened all twelve in the first 24 s of ~84: 81 % of the tokens in the first 26 %)."""
    trace = make_trace(FULL, seed)
    openings = sorted(r.t_s for r in trace if r.kind == "new")
    span = FULL.span_s
    assert len(openings) == FULL.conversations
    assert openings[-1] > 0.75 * span
    for third in range(3):
        assert any(third * span / 3 <= t < (third + 1) * span / 3 for t in openings)
    assert max(b - a for a, b in zip([0.0, *openings], [*openings, span])) < span / 3
    quarters = load_by_quarter(trace, first_guess(trace))
    assert max(quarters) < 0.5


def test_the_openings_gaps_are_poissons_spread_in_every_draw():
    """Each draw's gaps are the exponential law's quantiles (scaled to the run): the same spread whatever the seed,
    only their order moves."""
    gaps = []
    for seed in range(3):
        openings = sorted(r.t_s for r in make_trace(FULL, seed) if r.kind == "new")
        gaps.append(sorted(round(b - a, 6) for a, b in zip(openings, [*openings[1:], FULL.span_s])))
    assert gaps[0] == gaps[1] == gaps[2]
    assert max(gaps[0]) / min(gaps[0]) > 20  # an exponential's tail against its head, not an even spacing


@pytest.mark.parametrize("seed", range(3))
def test_no_later_turn_is_planned_past_the_run(seed):
    """A conversation keeps the turns that fit in the run at the trace's nominal step: early ones all of them, the
    last ones fewer — the run ends with its openings, not with a tail of turns."""
    trace = make_trace(FULL, seed)
    arrivals = first_guess(trace, FULL.step_s)
    assert max(arrivals) <= FULL.span_s
    kept = [sum(r.conv == c for r in trace) for c in range(FULL.conversations)]
    assert max(kept) == FULL.turns and min(kept) < FULL.turns
    assert 45 <= len(trace) <= 70
    assert sum(r.kind == "anomalous" for r in trace) == FULL.anomalous


def test_the_quick_trace_keeps_its_first_shape():
    """--quick: an opening every 1.5 s, every conversation all its turns, 27 requests."""
    trace = make_trace(QUICK, 0)
    assert len(trace) == 27
    assert [r.t_s for r in trace if r.kind == "new"] == pytest.approx([0.2 + 1.5 * c for c in range(5)])
    assert all(turns_kept(QUICK, t) == QUICK.turns for t in (0.2, 100.0))


def test_the_first_guess_puts_each_turn_its_think_time_after_the_answer_before():
    trace = make_trace(FULL, 0)
    arrivals = first_guess(trace, 0.01)
    first = next(i for i, r in enumerate(trace) if r.conv == 0 and r.turn == 0)
    second = next(i for i, r in enumerate(trace) if r.conv == 0 and r.turn == 1)
    assert arrivals[second] == pytest.approx(arrivals[first] + FULL.new_output_tokens * 0.01 + trace[second].t_s)
    assert not any(math.isnan(a) for a in arrivals)


def test_the_full_traces_think_times_are_drawn_so_no_two_conversations_lock_in_phase():
    """Fixed think times lock two conversations whose answers end in the same decode step: every later turn of
    theirs then comes together (serve18b's pdd: 12 arrival gaps under 0.2 s of 55, Poisson's 5.9, its TTFT P50
    +7-15 % in the simulator over the same trace's unlocked arrivals). The full trace draws them (exponential,
    mean think_s): two conversations' think times differ turn by turn, their mean stays think_s."""
    draws = [t for seed in range(10) for conv in think_times(FULL, seed) for t in conv]
    assert len(set(draws)) == len(draws)
    mean = sum(draws) / len(draws)
    assert mean == pytest.approx(FULL.think_s, rel=0.15)
    assert sum((t - mean) ** 2 for t in draws) / len(draws) / mean ** 2 > 0.6  # exponential's cv² 1, not a jitter
    for seed in range(3):  # the trace carries them: each later turn its own conversation's draw
        trace = make_trace(FULL, seed)
        thinks = think_times(FULL, seed)
        assert [r.t_s for r in trace if r.kind == "turn"] == [thinks[r.conv][r.turn - 1] for r in trace
                                                              if r.kind == "turn"]


def test_think_fixed_keeps_the_trace_served_before_the_draw():
    """``--think fixed`` re-predicts a run served before the draw: every later turn think_s after the answer, and
    bench_serve refuses a saved run whose request count is not this trace's, naming --think fixed."""
    from dataclasses import replace

    trace = make_trace(replace(FULL, think="fixed"), 0)
    assert len(trace) == 56 and {r.t_s for r in trace if r.kind == "turn"} == {FULL.think_s}
    with pytest.raises(ValueError, match="TraceConfig.think must be one of fixed, exponential, got 'gamma'"):
        make_trace(replace(FULL, think="gamma"), 0)


def test_a_served_run_of_another_trace_is_refused_naming_think_fixed(tmp_path, capsys):
    import json

    from bench import bench_serve

    served = tmp_path / "x.served.json"
    served.write_text(json.dumps({"pdd": {"arrivals": [0.1] * 56}}))
    with pytest.raises(SystemExit) as exc:
        bench_serve.main(["--served", str(served), "--profile", str(served), "--runtime", str(served),
                          "--no-predict"])
    assert "needs --think fixed" in str(exc.value)


def test_a_dry_run_needs_the_saved_profile_and_runtime(capsys):
    from bench import bench_serve

    with pytest.raises(SystemExit) as exc:
        bench_serve.main(["--dry"])
    assert exc.value.code == 2
    assert "--dry needs --profile and --runtime" in capsys.readouterr().err


DATA = Path(__file__).parent / "data"  # serve18's CPU profile of the bench model and its runtime figures


def test_a_dry_runs_turns_come_their_think_time_after_their_simulated_answers():
    """``--dry``: each later turn arrives ``think_s`` after the simulator finished the turn before it (as the
    executor's replay submits it), so a conversation's 320-token opening pushes its next turn past the think time."""
    import json

    from placer.sim.runtime import ExecutorRuntime

    from bench.serve_dry import closed_loop_arrivals
    from bench.serve_scenario import local_kv_gbit
    from executor.transport.shaping import LinkShape

    trace = make_trace(QUICK, 0)
    runtime = json.loads((DATA / "serve18.runtime.json").read_text())
    arrivals = closed_loop_arrivals(trace, "same-dc-pd", LinkShape(0.2, 30.0, 5.0, 0.0),
                                    DATA / "serve18.profile.json", local_kv_gbit(runtime),
                                    ExecutorRuntime.from_dict(runtime), seed=0)
    at = {(r.conv, r.turn): a for r, a in zip(trace, arrivals) if r.conv >= 0}
    opening_gaps = [at[(c, 1)] - at[(c, 0)] - QUICK.think_s for c in range(QUICK.conversations)]
    turn_gaps = [at[(c, k)] - at[(c, k - 1)] - QUICK.think_s for c in range(QUICK.conversations)
                 for k in range(2, QUICK.turns)]
    assert min(turn_gaps) > 0  # an 8-token answer takes time
    assert max(turn_gaps) < min(opening_gaps)  # a 320-token one far more


@pytest.mark.slow
def test_the_full_trace_simulated_as_served_hands_off_both_ways_and_the_planner_reads_its_tpot():
    """The full trace, simulated as if served (serve18's profile and runtime, no calibration serve): both handoff
    modes, the decoders under half busy, and the planner's TPOT mean within 20 % of the simulator on the trace's
    own arrivals (the first shape's: −30…−39 %)."""
    import contextlib
    import io
    import json

    from bench.serve_dry import dry
    from executor.transport.shaping import LinkShape

    runtime = json.loads((DATA / "serve18.runtime.json").read_text())
    with contextlib.redirect_stdout(io.StringIO()):
        out = dry(make_trace(FULL, 0), LinkShape(0.2, 30.0, 5.0, 0.0), DATA / "serve18.profile.json", runtime, 0)
    pred = out["pred"]
    handoffs = pred["simulator"]["pdd"]["handoff"]["handoffs"]
    assert handoffs["one-shot"] > 0 and handoffs["catch-up"] > 0
    for name, sim in pred["simulator"].items():
        assert max(b for b in sim["busy"].values() if b is not None) < 0.5
        planned = pred["planner_bare"][name]["tpot"][2]
        traced = pred["ladder"][name]["sim: trace, no runtime"]["TPOT mean"]
        assert abs(planned / traced - 1) < 0.2, name


def test_the_report_counts_arrivals_that_came_in_pairs_against_poissons_count():
    """Turns locked in pairs show as gaps under 0.2 s far above what Poisson arrivals at the run's rate give."""
    import random

    from bench.serve_report import clumped_arrivals

    rng = random.Random(1)
    t, poisson = 0.0, []
    for _ in range(2000):
        t += rng.expovariate(0.5)
        poisson.append(t)
    close, gaps, expected = clumped_arrivals(poisson)
    assert gaps == 1999 and close == pytest.approx(expected, rel=0.25)
    paired = sorted([a for a in poisson[::2] for a in (a, a + 0.03)])  # every arrival with a twin 30 ms later
    close, gaps, expected = clumped_arrivals(paired + [math.nan])
    assert close >= gaps // 2 and close > 4 * expected
