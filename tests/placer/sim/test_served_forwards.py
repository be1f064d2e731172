"""bench/served_forwards.py: served forwards grouped by what ran beside them, against the Host's charge."""

from __future__ import annotations

import math

import pytest

from bench import served_forwards
from placer.sim.runtime import ExecutorRuntime
from tests.support import LinearTable

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
    rows = {(r["kind"], tuple(r["beside"])): r for r in served_forwards.compare(forwards, LinearTable(), RT, least=1)}
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
    assert served_forwards.compare({"decode": [[1, 500, 0.02, 0.022]]}, LinearTable(), RT) == []


def test_a_calibration_serve_gives_the_paces_and_the_figures_beside_each_kind():
    """Pace: wall ÷ table of the forwards with nothing of ours beside; beside a kind: that group's ÷ the pace."""
    decode = [[1, 500, 0.02, 0.025, 10.0 + 0.1 * k, "d0"] for k in range(10)]  # alone: 1.25x the table
    prefill = [[1, 100, 0.1, 0.12, 20.0 + 0.5 * k, "p0"] for k in range(10)]  # alone: 1.2x
    # ten prefills each with a decoder stepping through it, at 1.5x; the decoder's steps beside them at 1.5x
    prefill += [[1, 100, 0.1, 0.15, 30.0 + 0.5 * k, "p0"] for k in range(10)]
    decode += [[1, 500, 0.02, 0.03, 30.0 + 0.5 * k + 0.03 * j, "d1"] for k in range(10) for j in range(4)]
    cal = served_forwards.calibration({"prefill": prefill, "decode": decode}, LinearTable())
    assert cal["decode_pace"] == pytest.approx(1.25) and cal["prefill_pace"] == pytest.approx(1.2)
    assert cal["interference"] == {"prefill": {"decode": pytest.approx(1.5 / 1.2, abs=1e-3)},
                                   "decode": {"prefill": pytest.approx(1.5 / 1.25, abs=1e-3)}}
    assert cal["forwards"] == {"decode alone": 10, "decode beside prefill": 40, "prefill alone": 10,
                               "prefill beside decode": 10}
    rt = ExecutorRuntime.from_dict({**{f: getattr(RT, f) for f in ("cores", "slowdown", "request_overhead_s",
                                                                   "kv_export_bytes_per_s", "kv_import_bytes_per_s",
                                                                   "token_stream_s")},
                                    "prefill_pace": cal["prefill_pace"], "decode_pace": cal["decode_pace"],
                                    "interference": cal["interference"], "speedup": [1.0, 2.0]})
    # the simulator then charges each group what it was served at
    for row in served_forwards.compare({"prefill": prefill, "decode": decode}, LinearTable(), rt, least=1):
        assert row["simulated"] == pytest.approx(row["served_wall"], abs=1e-3)


def test_too_few_forwards_in_a_group_give_no_figure():
    decode = [[1, 500, 0.02, 0.025, 10.0 + 0.1 * k, "d0"] for k in range(9)]
    assert served_forwards.calibration({"decode": decode}, LinearTable()) == {"forwards": {"decode alone": 9}}
    assert served_forwards.calibration({"decode": decode}, LinearTable(), least=9)["decode_pace"] == pytest.approx(1.25)
    assert served_forwards.calibration({"decode": [[1, 500, 0.02, 0.022]]}, LinearTable()) == {"forwards": {}}


def test_the_calibration_replaces_the_probes_figures_where_it_has_them():
    probes = ExecutorRuntime.from_dict({
        **{f: getattr(RT, f) for f in ("cores", "slowdown", "request_overhead_s", "kv_export_bytes_per_s",
                                       "kv_import_bytes_per_s", "token_stream_s")},
        "prefill_pace": 0.9, "decode_pace": 0.95, "line_bytes_per_s": 25e6,
        "interference": {"decode@1": {"prefill": 1.2, "decode": 1.1, "line": 1.15},
                         "decode@4": {"prefill": 1.05, "decode": 1.0}, "prefill": {"decode": 1.3, "line": 1.2}}})
    rt = served_forwards.calibrated(probes, {"decode_pace": 1.2, "interference": {"decode": {"decode": 1.4}}})
    assert (rt.prefill_pace, rt.decode_pace, rt.line_in_pace) == (0.9, 1.2, True)  # no prefill figure: the probes'
    assert rt.beside("decode", "decode", 1) == rt.beside("decode", "decode", 4) == 1.4  # the served figure, any batch
    assert rt.beside("decode", "prefill", 4) == 1.05 and rt.beside("prefill", "decode") == 1.3  # the probes' stand
    assert not rt.line_rows()  # a busy line's cost is in the served forwards


def _grid_table():
    from placer.profiles.tables import Grid

    sizes, contexts = (16.0, 64.0, 256.0, 1024.0, 2048.0), (0.0, 512.0, 2048.0)

    class Table:
        prefill = Grid(sizes, contexts, tuple(tuple(1e-4 * n + 2e-5 * c + 1e-3 for c in contexts) for n in sizes))
        decode = Grid((1.0, 4.0), (256.0, 2048.0), ((0.01, 0.03), (0.02, 0.09)))

    return Table()


def _lone_prefills(table, shapes_and_ratios, n=30):
    """[size, context, cpu, wall, began, instance] rows of lone prefills, one after another."""
    rows, t = [], 0.0
    for size, ctx, ratio in shapes_and_ratios:
        for _ in range(n):
            wall = ratio * table.prefill.seconds_at(size, ctx)
            rows.append([size, ctx, wall, wall, t, "p0"])
            t += wall + 0.01
    return {"prefill": rows, "decode": []}


def test_the_prefill_table_is_reshaped_to_the_served_prefills_and_keeps_its_level():
    table = _grid_table()
    # short prefills after a long context served at 0.7x the table, long ones at 1.1x (one pace misses both)
    forwards = _lone_prefills(table, [(64, 1500, 0.7), (1024, 256, 1.1)])
    factors = served_forwards.table_shape(forwards, table, "prefill")
    profile = {"tables": [{"prefill": {"seconds": [list(r) for r in table.prefill.seconds]}, "engine": "e"}]}
    seconds = served_forwards.reshaped_profile(profile, "prefill", factors)["tables"][0]["prefill"]["seconds"]
    from placer.profiles.tables import Grid

    shaped = Grid(table.prefill.sizes, table.prefill.contexts, tuple(map(tuple, seconds)))
    short = 0.7 * table.prefill.seconds_at(64, 1500) / shaped.seconds_at(64, 1500)
    long = 1.1 * table.prefill.seconds_at(1024, 256) / shaped.seconds_at(1024, 256)
    assert abs(long / short - 1) < 0.2 < 1.1 / 0.7 - 1  # the 57 % between the two shapes mostly gone
    assert factors[0][0] == 1.0  # a point no prefill comes near keeps its profiled value
    assert served_forwards.calibration(forwards, type("T", (), {"prefill": shaped, "decode": table.decode})(),
                                       least=10)["prefill_pace"] == pytest.approx(1.0, abs=0.15)


def test_too_few_lone_prefills_leave_the_table_as_profiled():
    table = _grid_table()
    assert served_forwards.table_shape(_lone_prefills(table, [(64, 1500, 0.7)], n=5), table, "prefill") == []


def _lone_decodes(cpu: float, wall: float, n: int = 20, at: float = 0.0) -> dict:
    return {"decode": [[1, 500, cpu, wall, at + 0.1 * k, "d0"] for k in range(n)]}


def test_the_host_drift_between_two_serves_is_their_thread_cpu_pace_not_their_waits():
    steady = _lone_decodes(0.02, 0.022)
    waited = _lone_decodes(0.02, 0.05)  # the same CPU seconds, waiting for a core or the GIL: the host's speed held
    burst = _lone_decodes(0.045, 0.046)  # every step's CPU seconds 2.25x: the host itself slowed
    assert served_forwards.host_drift(steady, waited, LinearTable()) == pytest.approx(1.0)
    assert served_forwards.host_drift(steady, burst, LinearTable()) == pytest.approx(2.25)
    assert served_forwards.host_drift(burst, steady, LinearTable()) == pytest.approx(2.25)
    # too few lone forwards of a kind to say: no drift claimed
    assert served_forwards.host_drift(steady, _lone_decodes(0.045, 0.046, n=19), LinearTable()) == 1.0


def test_a_calibration_the_host_disturbed_is_served_again_with_its_serve(monkeypatch):
    """bench_serve serves the calibration and the measured trace as a pair again while the host's pace moved
    beyond HOST_DRIFT between them, at most ``retries`` times, and keeps the pair that moved least."""
    from bench import serve_run as bench_serve  # calibrated_serve and the serve it calls
    served = iter([_lone_decodes(0.045, 0.046), _lone_decodes(0.02, 0.021),  # pair 1: 2.25x
                   _lone_decodes(0.034, 0.035), _lone_decodes(0.02, 0.021),  # pair 2: 1.7x
                   _lone_decodes(0.05, 0.05), _lone_decodes(0.02, 0.021)])  # pair 3: 2.5x
    calls = []

    def serve(name, trace, line, ec, seed):
        calls.append(seed)
        return {"forwards_served": next(served), "seed": seed, "call": len(calls)}

    monkeypatch.setattr(bench_serve, "serve", serve)
    cal, res, drifts = bench_serve.calibrated_serve("pdd", [], [], None, None, 7, LinearTable(), retries=2)
    assert drifts == [2.25, 1.7, 2.5] and calls == [8, 7] * 3  # the calibration's seed, then the trace's
    assert (cal["call"], res["call"]) == (3, 4)  # the pair that moved least
    served = iter([_lone_decodes(0.022, 0.023), _lone_decodes(0.02, 0.021)])
    calls.clear()
    *_, drifts = bench_serve.calibrated_serve("pdd", [], [], None, None, 7, LinearTable(), retries=2)
    assert drifts == [1.1] and len(calls) == 2  # a steady host: served once
    served = iter([_lone_decodes(0.02, 0.021)])
    calls.clear()
    cal, res, drifts = bench_serve.calibrated_serve("pdd", [], [], None, None, 7, None, retries=2)
    assert cal is None and drifts == [1.0] and calls == [7]  # no calibration: the trace alone, once


def test_the_hosts_speed_over_a_serve_is_read_window_by_window_off_its_lone_forwards():
    """Lone decode steps at the calibration's pace for 20 s, then 1.5x its CPU seconds; steps beside a prefill
    are left out, a window with too few lone steps takes the one before, and times start at the first arrival."""
    fast = _lone_decodes(0.022, 0.023, n=30, at=5.0)  # 5.0-7.9 s: window 0 (first arrival at 5 s)
    slow = _lone_decodes(0.033, 0.034, n=30, at=25.0)  # 25-27.9 s: window 2
    few = _lone_decodes(0.05, 0.05, n=5, at=37.0)  # window 3: too few, takes window 2's
    beside = {"decode": [[1, 500, 0.08, 0.08, 46.0 + 0.1 * k, "d1"] for k in range(30)],
              "prefill": [[30, 100, 3.0, 3.0, 45.9, "p0"]]}  # window 4: every step beside the prefill
    late = _lone_decodes(0.022, 0.023, n=30, at=55.0)  # window 5: back to the calibration's pace
    forwards = {"decode": fast["decode"] + slow["decode"] + few["decode"] + beside["decode"] + late["decode"],
                "prefill": beside["prefill"]}
    reference = {"decode": 1.1}  # the calibration's lone steps: CPU 1.1x the table (0.022 s)
    timeline = served_forwards.pace_timeline(forwards, LinearTable(), reference, start=5.0)
    assert timeline == [(0.0, pytest.approx(1.0)), (20.0, pytest.approx(1.5)), (50.0, pytest.approx(1.0))]
    # as a request felt it, on the whole: 20 s at 1.0, 30 s at 1.5, 10 s at 1.0
    assert served_forwards.mean_pace(timeline, 60.0) == pytest.approx(math.exp(30 * math.log(1.5) / 60))
    assert served_forwards.pace_timeline(_lone_decodes(0.02, 0.02, n=19), LinearTable(), reference) == []
    assert served_forwards.pace_timeline(forwards, LinearTable(), {"prefill": 1.0}) == []  # no lone prefills to read
