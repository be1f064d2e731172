"""The day's workload: the diurnal rate, a burst, a mix shift, a price change; a trace cut into windows;
the faces' bad input named."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli.app import app
from placer.errors import InputError
from placer.replan.timeline import Timeline, parse_duration, trace_windows, windows
from placer.specs import load_scenario
from tests.placer.conftest import EXAMPLES

FLAGSHIP = EXAMPLES / "pdd-two-dc.yaml"


@pytest.fixture(scope="module")
def flagship():
    return load_scenario(FLAGSHIP)


def test_the_default_day_peaks_at_the_scenario_rate_and_its_trough_is_over_three_times_lower(flagship):
    rates = [w.rate_rps for w in windows(flagship, Timeline())]
    assert len(rates) == 24 and max(rates) == pytest.approx(flagship.workload.arrival_rps, rel=0.01)
    assert max(rates) / min(rates) >= 3.0
    assert rates.index(max(rates)) in (13, 14)


def test_a_burst_a_mix_shift_and_a_price_change_hold_in_their_hours(flagship):
    plain = windows(flagship, Timeline())
    timeline = Timeline(burst_hour=3, burst_hours=1, burst_factor=2.0, mix_shift=1.0, mix_shift_from_hour=18,
                        mix_shift_to_hour=20, price_chip="GPU-B", price_hour=20, price_usd_per_h=0.9)
    day = windows(flagship, timeline)
    assert day[3].rate_rps == pytest.approx(2 * plain[3].rate_rps) and day[4].rate_rps == plain[4].rate_rps
    cold = flagship.workload.classes[0].share  # hit 0.55: below the shift's 0.9
    assert day[18].scenario.workload.classes[0].share > cold == day[20].scenario.workload.classes[0].share
    assert abs(sum(c.share for c in day[18].scenario.workload.classes) - 1) < 1e-9
    assert [w.scenario.chips[0].price_usd_per_h for w in (day[19], day[20])] == [1.25, 0.9]


def test_a_price_change_on_a_chip_the_scenario_does_not_define_is_named(flagship):
    with pytest.raises(InputError, match="price_chip: 'H100-SXM'"):
        windows(flagship, Timeline(price_chip="H100-SXM", price_hour=1, price_usd_per_h=2.0))


@pytest.mark.parametrize("text, seconds", [("90", 90.0), ("15m", 900.0), ("1h", 3600.0), ("1.5h", 5400.0)])
def test_durations(text, seconds):
    assert parse_duration(text, "--x") == seconds


def test_a_trace_is_fitted_window_by_window(tmp_path):
    path = tmp_path / "t.jsonl"  # timestamps in ms (docs/contracts.md trace format)
    lines = [{"timestamp": i * 10_000.0, "input_length": 8000, "output_length": 500, "hit_rate": 0.9}
             for i in range(360)]  # one hour at 0.1 req/s
    lines += [{"timestamp": 3_600_000 + i * 2000.0, "input_length": 8000, "output_length": 500, "hit_rate": 0.2}
              for i in range(1800)]  # the next at 0.5 req/s, colder
    path.write_text("\n".join(json.dumps(x) for x in lines))
    rows = trace_windows(path, 3600.0)
    assert [round(r[1], 2) for r in rows] == [0.1, 0.5]
    assert rows[0][2][0].hit_rate == pytest.approx(0.9) and rows[1][2][0].hit_rate == pytest.approx(0.2)
    result = CliRunner().invoke(app, ["workload", "fit", str(path), "--window", "1h"])
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.output)
    assert [w["arrival_rps"] for w in body["windows"]] == [0.1, 0.5]


@pytest.mark.parametrize("args, words", [(["--replan-every", "soon"], "--replan-every: not a duration"),
                                         (["--replan-every", "1h", "--strategy", "yolo"], "strategy: one of"),
                                         (["--replan-every", "1h", "--burst", "3:1"], "--burst: expected")])
def test_bad_replanning_options_are_named(tmp_path, args, words):
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    result = CliRunner().invoke(app, ["simulate", str(FLAGSHIP), str(plan), *args])
    assert result.exit_code == 2 and words in result.output


def test_windows_mirrored_about_the_peak_have_the_same_workload_to_the_bit(flagship):
    """The day's loop solves and simulates a workload once (its caches key on the workload): the hours
    either side of the peak (and the trough's, a day apart) must come out equal, not an ulp apart."""
    day = windows(flagship, Timeline())  # peak at 14 h: window 13 - k mirrors window 14 + k, mod 24
    for k in range(12):
        assert day[13 - k].rate_rps == day[(14 + k) % 24].rate_rps, k
    assert len({w.scenario.model_dump_json() for w in day}) == 12
