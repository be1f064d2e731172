"""bench/bench_serve.py's comparison: with --repeats, 'measured' is the median of the serves and the
executor's own spread over them is reported."""

from __future__ import annotations

import pytest

from bench import bench_serve, serve_predict


def _serve(ttft: float, tpot: float) -> dict:
    return {"ttft_s": [ttft] * 20, "tpot_s": [tpot] * 20}


def test_repeated_serves_are_compared_by_their_median_and_their_spread_is_reported(capsys):
    res = {**_serve(1.0, 0.05), "repeats": [_serve(1.2, 0.04), _serve(0.9, 0.06)]}
    pred = {"simulator": {"pdd": {"ttft": (1.1, 1.1, 1.1), "tpot": (0.07, 0.07)}}}
    out = bench_serve.compare({"pdd": res}, pred)
    p50 = out["rows"]["pdd"]["TTFT P50"]
    assert p50["serves"] == [1.0, 1.2, 0.9]
    assert p50["measured"] == pytest.approx(1.0)  # the median, not the first serve
    assert p50["error"] == pytest.approx(0.1)
    tpot = out["rows"]["pdd"]["TPOT P50"]
    assert tpot["measured"] == pytest.approx(0.05) and tpot["error"] == pytest.approx(0.4)
    # TTFT: (1.2 - 0.9) / 1.0; TPOT: (0.06 - 0.04) / 0.05
    assert out["worst_executor_spread"] == pytest.approx(0.4)
    text = capsys.readouterr().out
    assert "3 serves of this trace" in text
    assert "TTFT P50 0.900-1.200 (±15 %, simulated inside)" in text
    assert "TPOT P50 0.040-0.060 (±20 %, simulated outside)" in text


def test_the_ordering_is_checked_on_the_setups_the_executors_serves_order(capsys):
    """same-dc and pdd's serves overlap (0.30-0.36 against 0.31-0.35): which comes first is a coin toss, so the
    simulation may put them either way; cross-dc is slower in every serve and must stay last."""
    serves = {"same-dc-pd": (0.33, 0.30, 0.36), "pdd": (0.34, 0.31, 0.35), "cross-dc-pd": (1.9, 1.8, 2.0)}
    results = {n: {**_serve(v[0], 0.01), "repeats": [_serve(x, 0.01) for x in v[1:]]} for n, v in serves.items()}
    sim = lambda **p90: {"simulator": {n: {"ttft": (v, v, v), "tpot": (0.01, 0.01)} for n, v in p90.items()}}
    out = bench_serve.compare(results, sim(**{"same-dc-pd": 0.34, "pdd": 0.33, "cross-dc-pd": 1.9}))
    assert out["same_order"] and out["tied"] == [("same-dc-pd", "pdd")]
    assert "same on the pairs the executor's serves order; tied, their serves' P90s overlapping: same-dc-pd and pdd" \
        in capsys.readouterr().out
    out = bench_serve.compare(results, sim(**{"same-dc-pd": 0.34, "pdd": 2.0, "cross-dc-pd": 1.9}))
    assert not out["same_order"]
    assert "DIFFERENT" in capsys.readouterr().out


def test_one_serve_reports_no_spread():
    out = bench_serve.compare({"pdd": _serve(1.0, 0.05)},
                              {"simulator": {"pdd": {"ttft": (1.0, 1.0, 1.0), "tpot": (0.05, 0.05)}}})
    assert out["rows"]["pdd"]["TTFT P50"]["serves"] == [1.0]
    assert out["worst_executor_spread"] != out["worst_executor_spread"]  # NaN: nothing to spread


def test_repeats_below_one_are_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        bench_serve.main(["--repeats", "0"])
    assert exc.value.code == 2
    assert "--repeats must be at least 1, got 0" in capsys.readouterr().err


def test_each_serve_is_predicted_from_the_serve_just_before_it(monkeypatch, capsys):
    seen = []

    def fake_predict(trace, results, line, profile, runtime, seed, shape):
        (name, res), = results.items()
        seen.append((res["calibration"]["forwards_served"], res["forwards_served"], res["arrivals"]))
        return {"simulator": {name: {"ttft": (0.22, 0.22, 0.22), "tpot": (0.05, 0.05)}}}

    monkeypatch.setattr(serve_predict, "predict", fake_predict)
    first = {**_serve(0.2, 0.05), "forwards_served": "s1", "arrivals": [0.0], "calibration": {"forwards_served": "c"},
             "repeats": [{**_serve(0.25, 0.05), "forwards_served": "s2", "arrivals": [0.1]},
                         {**_serve(0.2, 0.04), "forwards_served": "s3"}]}  # saved without its arrivals
    chain = bench_serve.chained([], {"pdd": first}, None, None, {}, 0)
    assert seen == [("c", "s1", [0.0]), ("s1", "s2", [0.1]), ("s2", "s3", [0.0])]
    assert [row["TTFT P50"] for row in chain["pdd"]] == [(0.2, 0.22), (0.25, 0.22), (0.2, 0.22)]
    summary = bench_serve.print_chained(chain)
    # TTFT P50 and P90: +10 %, -12 %, +10 %; TPOT P50: 0, 0, +25 %
    assert summary["figures"] == 9 and summary["within_15"] == 8
    assert summary["worst_abs_error"] == pytest.approx(0.25)
    assert "8 of 9 within 15 %" in capsys.readouterr().out


def test_a_setup_served_once_gives_no_chain():
    assert bench_serve.chained([], {"pdd": {**_serve(0.2, 0.05), "calibration": {}}}, None, None, {}, 0) == {}
    assert bench_serve.print_chained({}) == {}


class _Grid:
    def seconds_at(self, size, context):
        return 0.02 * size


class _Table:
    prefill = decode = _Grid()


def _lone_steps(cpu: float, at: float, n: int = 30) -> dict:
    return {"decode": [[1, 500, cpu, cpu, at + 0.1 * k, "d0"] for k in range(n)]}


def test_as_served_is_each_serve_simulated_at_the_hosts_speed_as_it_went_then_their_median(monkeypatch, capsys):
    """The calibration's lone steps ran at the table's CPU seconds; serve 1 at 1.2x them from its 10th second,
    serve 2 at 1.5x throughout, serve 3 as the calibration. Each is simulated at its own arrivals with its own
    timeline, and the as-served figure is the median over the three, as 'measured' is."""
    seen = []

    def fake_simulate(scenario, plan, trace, arrivals, rt, seed):
        seen.append((arrivals[0], rt.host_pace))
        slowest = max(f for _, f in rt.host_pace)
        return {"ttft": (0.1 * slowest,) * 3, "tpot": (0.01 * slowest,) * 2}

    monkeypatch.setattr(serve_predict, "_simulate", fake_simulate)
    s1 = {"arrivals": [1.0, 30.0], "forwards_served": {"decode": _lone_steps(0.02, 1.0)["decode"]
                                                       + _lone_steps(0.024, 11.0)["decode"]}}
    s2 = {"arrivals": [2.0, 30.0], "forwards_served": _lone_steps(0.03, 2.0)}
    s3 = {"arrivals": [3.0, 30.0], "forwards_served": _lone_steps(0.02, 3.0)}
    res = {**s1, "repeats": [s2, s3]}
    got = bench_serve.host_paced([], res, _lone_steps(0.02, 0.0), _Table(), None, None, _rt(), 0)
    assert seen == [(1.0, ((0.0, 1.0), (10.0, 1.2))), (2.0, ((0.0, 1.5),)), (3.0, ((0.0, 1.0),))]
    assert got["ttft"] == pytest.approx((0.12,) * 3)  # the median of 0.12, 0.15 and 0.10
    moves = got["host_pace"]
    assert [m["high"] for m in moves] == [1.2, 1.5, 1.0]
    assert moves[0]["mean"] == pytest.approx(1.2 ** (19 / 29), abs=1e-3)  # 1.2 over 19 of its 29 s
    pred = {"simulator": {"pdd": {"ttft": (0.1,) * 3, "tpot": (0.01,) * 2}},
            "as_served": {"pdd": {k: v for k, v in got.items() if k != "host_pace"}}, "host_pace": {"pdd": moves}}
    bench_serve.compare({"pdd": {"ttft_s": [0.12] * 20, "tpot_s": [0.012] * 20}}, pred)
    assert "the host's speed in each serve ÷ the calibration's" in capsys.readouterr().out
    # a serve saved without its forwards' times cannot be read: no as-served figure rather than a wrong one
    assert bench_serve.host_paced([], {**s1, "repeats": [{"arrivals": [0.0]}]}, _lone_steps(0.02, 0.0), _Table(),
                                  None, None, _rt(), 0) == {}


def test_as_served_charges_the_prefills_their_own_move(monkeypatch, capsys):
    """The serve's decode steps went as the calibration's, its prefills 1.3x: the simulation gets the decode
    steps' timeline as host_pace and the prefills' as host_pace_prefill, and the report prints both moves."""
    seen = []

    def fake_simulate(scenario, plan, trace, arrivals, rt, seed):
        seen.append((rt.host_pace, rt.host_pace_prefill))
        return {"ttft": (0.1,) * 3, "tpot": (0.01,) * 2}

    monkeypatch.setattr(serve_predict, "_simulate", fake_simulate)
    prefills = lambda cpu: [[1, 500, cpu, cpu, 5.0 + 0.5 * k, "p0"] for k in range(20)]  # table: 0.02 s each
    cal = {**_lone_steps(0.02, 0.0), "prefill": prefills(0.02)}
    serve = {"arrivals": [0.0, 30.0], "forwards_served": {**_lone_steps(0.02, 0.0), "prefill": prefills(0.026)}}
    got = bench_serve.host_paced([], serve, cal, _Table(), None, None, _rt(), 0)
    assert seen == [(((0.0, 1.0),), ((0.0, 1.3),))]
    assert got["host_pace"][0]["prefill_mean"] == pytest.approx(1.3)
    pred = {"simulator": {"pdd": {"ttft": (0.1,) * 3, "tpot": (0.01,) * 2}}, "host_pace": {"pdd": got["host_pace"]}}
    bench_serve.compare({"pdd": {"ttft_s": [0.1] * 20, "tpot_s": [0.01] * 20}}, pred)
    assert "1.00 (1.00-1.00) / 1.30" in capsys.readouterr().out


def _rt():
    from placer.sim.runtime import ExecutorRuntime

    return ExecutorRuntime.from_dict({"cores": 2, "slowdown": 1.0, "request_overhead_s": 0.0,
                                      "kv_export_bytes_per_s": 1e9, "kv_import_bytes_per_s": 1e9,
                                      "token_stream_s": 0.0})
