"""The simulator's start-up and drain from the executor's own measurements (bench/bench_startup.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.errors import InputError
from placer.plan import PoolOut
from placer.problem import resolve
from placer.replan.fleets import FleetState, Startup
from placer.specs import parse_scenario
from tests.placer.conftest import MICRO

FIGURES = {"source": "bench/bench_startup.py", "host": "vm", "load_gbyte_per_s_per_chip": 2.0, "warmup_s": 4.0,
           "drain_s": 0.5, "exam": {"bytes": 1, "predicted_startup_s": 4.3, "startup_s": 4.2},
           "drain": {"predicted_s": 0.4, "measured_s": 0.5}}


def test_measured_figures_are_the_same_terms_weights_over_rate_plus_warm_up(tmp_path):
    path = tmp_path / "startup.json"
    path.write_text(json.dumps(FIGURES))
    startup = Startup.measured(path)
    problem = resolve(parse_scenario(MICRO))
    row = PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=2, count=1)
    weights = problem.model.weight_bytes(problem.weight_dtype)
    assert startup.instance_s(problem, row) == pytest.approx(weights / (2 * 2.0e9) + 4.0)
    assert startup.drain_s == 0.5 and startup.measured_from["host"] == "vm"
    fleet = FleetState("replanned", startup)  # a leaving instance is charged the measured drain
    fleet.apply({row.key: row}, 0.0, problem)
    fleet.apply({}, 0.0, problem, instant=False)
    assert fleet.draining and fleet.draining[0][1] == pytest.approx(0.5)


@pytest.mark.parametrize("text,field", [('{"load_gbyte_per_s_per_chip": 1, "warmup_s": "x", "drain_s": 1}', "warmup_s"),
                                        ('{"warmup_s": 1, "drain_s": 1}', "load_gbyte_per_s_per_chip"),
                                        ("not json", "not valid JSON")])
def test_a_bad_measurements_file_is_an_input_error_naming_the_field(tmp_path, text, field):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=field):
        Startup.measured(path)


def test_the_bench_file_in_the_repository_loads():
    startup = Startup.measured(Path(__file__).resolve().parents[3] / "bench" / "data" / "startup_cpu.json")
    assert startup.load_gbyte_per_s_per_chip > 0 and startup.warmup_s > 0 and startup.drain_s > 0


class _Stream:
    def __init__(self, times: list[float]):
        self.token_times, self.created_at = times, times[0]

    def result(self, _timeout: float) -> None:
        return None


class _Router:
    """In-flight streams whose first 8 tokens came before now, the rest after, one of them stalling."""

    def __init__(self, pace_s: float, stall_s: float, tokens: int):
        self.pace_s, self.stall_s, self.tokens, self.made = pace_s, stall_s, tokens, 0

    def submit(self, _prompt, _sampling) -> _Stream:
        import time

        t0 = time.monotonic() - 7.5 * self.pace_s
        stall = self.stall_s if self.made == 0 else 0.0
        self.made += 1
        return _Stream([t0 + i * self.pace_s + (stall if i > 12 else 0.0) for i in range(self.tokens)])

    def drain(self, _name: str) -> None:
        return None

    def holding(self, _name: str) -> bool:
        return False


def test_a_drain_reports_when_its_streams_ended_and_the_stalls_beside_the_pace():
    from bench.bench_startup import drain_once

    got = drain_once(_Router(pace_s=0.002, stall_s=0.1, tokens=40), "d", inflight=4, tokens=40)
    assert got["pace_s_per_token"] == pytest.approx(0.002)
    assert got["finish_spread_s"] == pytest.approx(0.1, abs=1e-3)  # the stalled stream ends 100 ms after the others
    assert got["stall_s"] == pytest.approx(0.1, abs=1e-6)  # the gap (a pace + the stall) less the pace
    assert got["predicted_plus_stalls_s"] == pytest.approx(got["predicted_s"] + got["stall_s"])
