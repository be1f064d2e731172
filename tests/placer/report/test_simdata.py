"""Per-request data from the simulator agrees with the simulator's own figures."""

from __future__ import annotations

import pytest

from placer.report import simdata


def test_recorded_ttfts_give_the_simulators_percentiles(micro_scenario, micro_plan):
    from placer.optimize import as_problem

    run = simdata.simulate_plan(as_problem(micro_scenario), micro_plan, "pdd", requests=2000, seed=5)
    assert run.per_request and len(run.ttft_s) == run.data["measured_requests"]
    n = len(run.ttft_s)
    for q, key in ((0.5, "ttft_p50_s"), (0.9, "ttft_p90_s")):
        exact = run.ttft_s[max(0, int(q * n + 0.999999) - 1)]
        assert exact == pytest.approx(run.data[key], rel=0.01)
    xs, ys = simdata.cdf_points(run, max_points=100)
    assert len(xs) <= 101 and xs == sorted(xs) and ys[-1] == 1.0 and ys == sorted(ys)


def test_rld_share_over_time_adds_up_to_the_whole_run(relay_problem, relay_plan):
    assert any(p.role == "RLD" for p in relay_plan.pools)
    run = simdata.simulate_plan(relay_problem, relay_plan, "pdd", requests=3000, seed=2)
    assert sum(run.rld_tokens) / sum(run.out_tokens) == pytest.approx(run.data["rld_token_share"], abs=1e-6)
    ts, shares = simdata.rld_share_series(run, bins=20)
    assert len(ts) == 20 and ts == sorted(ts)
    assert all(s is None or 0.0 <= s <= 1.0 for s in shares) and any(s and s > 0 for s in shares)


def test_without_the_hook_the_run_falls_back_to_percentiles(monkeypatch, micro_scenario, micro_plan):
    from placer.optimize import as_problem

    class Changed:
        def __init__(self, *args, **kwargs):
            raise AttributeError("the simulator changed shape")

    monkeypatch.setattr(simdata, "_recording_class", lambda: Changed)
    run = simdata.simulate_plan(as_problem(micro_scenario), micro_plan, "pdd", requests=500)
    assert not run.per_request and run.data["requests"] == 500
    xs, ys = simdata.cdf_points(run)
    assert ys == [0.5, 0.9, 0.99] and xs == [run.data["ttft_p50_s"], run.data["ttft_p90_s"], run.data["ttft_p99_s"]]
    assert simdata.rld_share_series(run) == ([], [])
