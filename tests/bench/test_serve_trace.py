"""bench_serve's full trace offers a steady load over the whole run; the quick one keeps its first shape (issue 48)."""

from __future__ import annotations

import math

import pytest

from bench.serve_dry import first_guess, load_by_quarter
from bench.serve_trace import FULL, QUICK, make_trace, turns_kept


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
    assert arrivals[second] == pytest.approx(arrivals[first] + FULL.new_output_tokens * 0.01 + FULL.think_s)
    assert not any(math.isnan(a) for a in arrivals)


def test_a_dry_run_needs_the_saved_profile_and_runtime(capsys):
    from bench import bench_serve

    with pytest.raises(SystemExit) as exc:
        bench_serve.main(["--dry"])
    assert exc.value.code == 2
    assert "--dry needs --profile and --runtime" in capsys.readouterr().err
