"""`placer workload fit` measures a trace's arrival variability (workload.arrival_cv2, issue 48): the gaps'
cv² of a trace at the arrivals' own resolution, the dispersion of counts per bin of a binned one."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.workload.arrivals import interarrival_cv2, renewal_arrivals
from placer.workload.fit import trace_arrival_cv2


def _trace(path: Path, times_s: list[float]) -> Path:
    path.write_text("".join(json.dumps({"timestamp": round(t * 1000), "input_length": 1000, "output_length": 100,
                                        "hit_rate": 0.5}) + "\n" for t in times_s))
    return path


def _renewal(rate_rps: float, cv2: float, n: int, seed: int = 3) -> list[float]:
    it = renewal_arrivals(rate_rps, random.Random(seed), cv2)
    return [next(it) for _ in range(n)]


@pytest.mark.parametrize("cv2", [0.5, 2.0])
def test_a_fit_recovers_a_renewal_trace_cv2_from_its_gaps(tmp_path, cv2):
    trace = _trace(tmp_path / "t.jsonl", _renewal(2.0, cv2, 20_000))  # ms timestamps: 2 req/s, gaps ~500 ms
    measured, how = trace_arrival_cv2(trace)
    assert how == "gaps"
    assert measured == pytest.approx(cv2, rel=0.08)


@pytest.mark.parametrize("cv2", [0.5, 2.0])
def test_a_binned_trace_is_measured_by_its_counts_per_bin(tmp_path, cv2):
    # the Mooncake traces' form: arrivals counted in 3 s bins, every request of a bin at its start
    times = [3.0 * int(t / 3.0) for t in _renewal(10.0, cv2, 60_000)]
    trace = _trace(tmp_path / "binned.jsonl", times)
    measured, how = trace_arrival_cv2(trace)
    assert how == "counts per 3 s bin"
    # 30 arrivals a bin, 2 000 bins: seeds 1-4 within 9 % (the dispersion's O(1/30) bias and its noise)
    assert measured == pytest.approx(cv2, rel=0.15)
    assert abs(interarrival_cv2(times) - cv2) > 1.0  # the gaps of a binned trace say nothing


def test_workload_fit_writes_the_arrival_cv2_into_the_scenario_section(tmp_path):
    trace = _trace(tmp_path / "t.jsonl", _renewal(2.0, 0.5, 5_000))
    result = CliRunner().invoke(app, ["workload", "fit", str(trace)])
    assert result.exit_code == 0, result.output
    body = yaml.safe_load(result.stdout[result.stdout.index("# classes"):])
    assert body["workload"]["arrival_cv2"] == pytest.approx(0.5, rel=0.1)


def test_workload_fit_per_window_measures_each_windows_arrival_cv2(tmp_path):
    # a regular first half hour, a bursty second one: each window says its own
    regular = _renewal(2.0, 0.5, 3_600, seed=5)
    bursty = [1800.0 + t for t in _renewal(2.0, 3.0, 3_600, seed=6)]
    trace = _trace(tmp_path / "t.jsonl", [t for t in regular if t < 1800] + [t for t in bursty if t < 3600])
    result = CliRunner().invoke(app, ["workload", "fit", str(trace), "--window", "30m"])
    assert result.exit_code == 0, result.output
    windows = yaml.safe_load(result.stdout[result.stdout.index("# classes"):])["windows"]
    assert windows[0]["arrival_cv2"] == pytest.approx(0.5, rel=0.15)
    assert windows[1]["arrival_cv2"] == pytest.approx(3.0, rel=0.25)
