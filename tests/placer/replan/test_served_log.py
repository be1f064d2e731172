"""The replanned fleet fits what its simulated fleet served: the simulator's request log, not the classes."""

from __future__ import annotations

import random

from placer.optimize import SolveConfig, optimize
from placer.replan.loop import _fit_records
from placer.replan.timeline import Timeline, windows
from placer.sim import SimConfig
from placer.sim.records import simulate_recorded
from placer.specs import parse_scenario
from tests.placer.conftest import MICRO


def test_a_recorded_run_logs_every_finished_request_with_the_fields_a_job_fits():
    scenario = parse_scenario(MICRO)
    plan = optimize(scenario, SolveConfig(marginals=False))
    data, records = simulate_recorded(scenario, plan, SimConfig(requests=200, seed=0))
    assert len(records) == data["requests"] - data["rejected_requests"]
    sizes = {(c.input_tokens, c.output_tokens) for c in scenario.workload.classes}
    assert {(r["input_tokens"], r["output_tokens"]) for r in records} <= sizes
    assert all(0.0 <= r["hit_rate"] <= 1.0 and r["ttft_s"] >= 0 for r in records)


def test_the_fit_draws_from_the_served_log_where_the_window_has_one():
    wins = windows(parse_scenario(MICRO), Timeline(window_s=6 * 3600))
    served = [{"input_tokens": 123, "output_tokens": 45, "hit_rate": 0.5, "ttft_s": 0.1}]
    records, _ = _fit_records(wins[:2], random.Random(0), 100, {0: [(1.0, served)]})
    from_log = [r for r in records if r["input_tokens"] == 123]
    share = wins[0].requests / (wins[0].requests + wins[1].requests)
    assert len(from_log) == round(100 * share)  # window 0 from its log; window 1 (no log) from its classes
    assert all(r["input_tokens"] != 123 for r in records if r not in from_log)
