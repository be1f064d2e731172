"""bench/bench_serve.py's comparison: with --repeats, 'measured' is the median of the serves and the
executor's own spread over them is reported."""

from __future__ import annotations

import pytest

from bench import bench_serve


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
