"""bench_serve's TPOT like with like (issue 48): the planner's TPOT is a mean over tokens, so it is read against
the measured mean over tokens — a row of its own — and not against the median over requests."""

from __future__ import annotations

import math

import pytest

from bench import serve_report, serve_tpot


def _serve() -> dict:
    # 18 short turns decoding alone (16 tokens, 5 ms a gap) and 2 long answers sharing their steps (320 tokens,
    # 30 ms a gap): the median over requests is 5 ms, the mean over tokens (15·18·5 + 319·2·30) / (15·18 + 319·2)
    tpots = [0.005] * 18 + [0.030] * 2
    outputs = [[1] * 16] * 18 + [[1] * 320] * 2
    return {"ttft_s": [0.1] * 20, "tpot_s": tpots, "outputs": outputs}


MEAN = (15 * 18 * 0.005 + 319 * 2 * 0.030) / (15 * 18 + 319 * 2)


def test_the_measured_tpot_mean_weighs_each_token_once():
    assert serve_tpot.measured_token_mean(_serve()) == pytest.approx(MEAN)
    # a serve that kept its gaps reads them; one whose gaps do not line up with its TPOTs has no mean
    assert serve_tpot.measured_token_mean({"tpot_s": [0.01, 0.02], "tpot_gaps": [1, 3]}) == pytest.approx(0.0175)
    assert math.isnan(serve_tpot.measured_token_mean({"tpot_s": [0.01, 0.02], "outputs": [[1, 2]]}))
    # a repeat saved without its outputs takes the first serve's (same trace, greedy: same lengths)
    repeat = {"tpot_s": [0.010] * 18 + [0.030] * 2}
    assert serve_tpot.measured_token_mean(repeat, _serve()["outputs"]) > MEAN


def test_the_planner_tpot_is_gated_on_the_mean_over_tokens_not_the_median_over_requests(capsys):
    pred = {"simulator": {"pdd": {"ttft": (0.1, 0.1, 0.1), "tpot": (0.005, 0.03, MEAN)}},
            "planner": {"pdd": {"ttft": (0.1, 0.1, 0.1), "tpot": (math.nan, math.nan, 1.1 * MEAN)}}}
    out = serve_report.compare({"pdd": _serve()}, pred)
    rows = out["rows"]["pdd"]
    assert rows["TPOT mean"]["measured"] == pytest.approx(MEAN)
    assert rows["TPOT mean"]["planner_error"] == pytest.approx(0.10)
    assert rows["TPOT mean"]["error"] == pytest.approx(0.0)
    assert math.isnan(rows["TPOT P50"]["planner"])  # no planner cell on a percentile over requests
    assert out["worst_planner_error"] == pytest.approx(0.10)  # +10 %: inside; against the 5 ms median +310 %
    text = capsys.readouterr().out
    assert "TPOT mean: over tokens" in text and "the planner on TTFT P50, TTFT P90, TPOT mean" in text
    assert "3 of 3 within 15 % on TTFT P50, TTFT P90, TPOT mean" in text
