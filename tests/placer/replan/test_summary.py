"""The day's figures: TTFT P90 and P99 per window and over the day."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from placer.replan.summary import FleetTally


def _tally() -> FleetTally:
    tally = FleetTally("replanned")
    fleet = SimpleNamespace(serving={})
    tally.add_window(SimpleNamespace(index=0, requests=100.0), 1.0, fleet)
    tally.add_segment(0, 100.0, 1.0, 0.1, 0.2, 0.4)
    tally.add_window(SimpleNamespace(index=1, requests=100.0), 1.0, fleet)
    tally.add_segment(1, 100.0, 0.5, 1.0, 2.0, 4.0)
    return tally


def test_p99_ttft_is_reported_per_window_and_over_the_day_above_the_p90():
    tally = _tally()
    calm, busy = tally.window_figures(0), tally.window_figures(1)
    assert calm["ttft_p99_s"] == pytest.approx(0.4) and busy["ttft_p99_s"] == pytest.approx(4.0)
    day = tally.day_figures(7200.0)
    assert day["ttft_p90_s"] < day["ttft_p99_s"] <= 4.0
    assert day["ttft_p99_s"] > busy["ttft_p90_s"]  # the busy window's tail is the day's tail
