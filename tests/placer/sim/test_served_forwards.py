"""bench/served_forwards.py: served forwards grouped by what ran beside them, against the Host's charge."""

from __future__ import annotations

import pytest

from bench import served_forwards
from placer.sim.runtime import ExecutorRuntime


class _Grid:
    def __init__(self, seconds: float):
        self.seconds = seconds

    def seconds_at(self, size, context):
        return self.seconds * size


class _Table:
    prefill = _Grid(0.1)
    decode = _Grid(0.02)


RT = ExecutorRuntime.from_dict({"cores": 2, "slowdown": 1.0, "request_overhead_s": 0.0, "kv_export_bytes_per_s": 1e9,
                                "kv_import_bytes_per_s": 1e9, "token_stream_s": 0.0, "decode_pace": 1.1,
                                "prefill_pace": 1.0, "interference": {"decode@1": {"prefill": 1.5},
                                                                       "decode@2": {"prefill": 1.3}}})


def test_forwards_are_grouped_by_what_the_other_instances_ran_and_charged_as_the_simulator_would():
    forwards = {  # [size, context, thread CPU s, wall s, began s, instance]
        "prefill": [[1, 100, 0.1, 0.1, 1.0, "p0"]],
        "decode": [[1, 500, 0.02, 0.022, 0.0, "d0"], [1, 500, 0.02, 0.03, 1.02, "d0"],  # the second inside the prefill
                   [2, 500, 0.04, 0.05, 1.06, "d0"],  # 0.04 of its 0.05 s beside the prefill: more than half
                   [1, 500, 0.02, 0.024, 1.09, "d0"]],  # only 0.01 s beside it: alone
    }
    rows = {(r["kind"], tuple(r["beside"])): r for r in served_forwards.compare(forwards, _Table(), RT, least=1)}
    alone = rows["decode", ()]
    assert alone["forwards"] == 2 and alone["served_wall"] == pytest.approx((0.022 + 0.024) / 0.04, abs=1e-3)
    assert alone["simulated"] == pytest.approx(1.1)  # the decode pace alone
    beside = rows["decode", ("prefill",)]
    assert beside["forwards"] == 2 and beside["served_wall"] == pytest.approx(0.08 / 0.06, abs=1e-3)
    # each step charged at its own batch (1: 1.5, 2: 1.3), weighted by its table seconds
    assert beside["simulated"] == pytest.approx(1.1 * (0.02 * 1.5 + 0.04 * 1.3) / 0.06, abs=1e-3)
    assert beside["error"] == pytest.approx(beside["simulated"] / beside["served_wall"] - 1, abs=1e-3)
    assert rows["prefill", ("decode",)]["forwards"] == 1  # the prefill ran beside the decoder's steps


def test_a_run_logged_without_start_times_has_no_groups():
    assert served_forwards.compare({"decode": [[1, 500, 0.02, 0.022]]}, _Table(), RT) == []
