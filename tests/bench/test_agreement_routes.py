"""``bench_agreement.py --random``'s route listing and run window (bench/agreement_routes.py, issue 42): the route rows
beyond 10 % named with their classes, each judged against its standard error (noise) and against the relaxation
time of its P queues and line (a run shorter than that reads their transient from empty, not the law's steady
state), and drawn runs lengthened to measure past it."""

from __future__ import annotations

import math

import pytest

from bench.agreement_cases import small_pdd_dict
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig
from placer.specs import parse_scenario


@pytest.fixture(scope="module")
def stats(bench_path):
    import agreement_routes

    return agreement_routes


def test_a_busy_queue_of_long_services_relaxes_slowly(stats):
    """2λE[S²]/(1 − ρ)²: rnd-7-29-trace's L20 tp2 queue of 89-149 s prefills at ρ 0.81 takes hours to forget an
    empty start (its trace replays span 519 s); a light queue of short prefills, a fraction of a second."""
    long_prefills = stats.relaxation_s(0.814, 0.814 / 120.0 * 120.0 ** 2 * 1.05)
    short_prefills = stats.relaxation_s(0.4, 0.4 / 0.05 * 0.05 ** 2 * 1.5)
    assert long_prefills > 3600 and short_prefills < 1.0
    assert stats.relaxation_s(1.0, 1.0) == math.inf
    # an M/M/1 queue: 4·E[W]/(1 − ρ), E[W] = ρ/(μ(1 − ρ))
    rho, mu = 0.8, 2.0
    assert stats.relaxation_s(rho, rho / (1 / mu) * 2 / mu ** 2) == pytest.approx(4 * rho / (mu * (1 - rho)) / (1 - rho))


def test_a_drawn_run_shorter_than_its_routes_relaxation_is_lengthened_a_trace_is_not(stats):
    """rnd-7-0-mixed: 30,000 requests at 112 req/s measure 254 s, its dc3→dc2 line relaxes over 373 s — the run is
    lengthened to warm up over one relaxation and measure two; a run already long enough, or a trace, is left."""
    config = SimConfig(requests=30_000, seed=7, warmup_fraction=0.05)
    longer = stats.window_config(config, 373.0, 112.0)
    warm = longer.requests * longer.warmup_fraction
    assert warm >= 373.0 * 112.0 * 0.999
    assert longer.requests - warm >= stats.MEASURED_QUEUE_RELAXATIONS * 373.0 * 112.0 * 0.999
    assert stats.window_config(config, 10.0, 112.0) == config
    trace = SimConfig(requests=30_000, seed=7, workload="trace", trace="t.jsonl")
    assert stats.window_config(trace, 6000.0, 3.85) == trace
    capped = stats.window_config(config, 1e6, 112.0)
    assert capped.requests == stats.MAX_WINDOW_REQUESTS
    assert capped.requests * (1 - capped.warmup_fraction) == pytest.approx(stats.MAX_WINDOW_REQUESTS)


def _route(src, dst, n, ilp, sim):
    return {"pipeline": "P-MD", "src": src, "dst": dst, "sim_requests": n, "ilp_ttft_p90_s": ilp,
            "sim_ttft_p90_s": sim, "ttft_p90_error": sim / ilp - 1}


def test_the_listing_names_rows_beyond_ten_percent_and_tells_noise_and_window_from_the_rest(stats, capsys):
    laws = {("P-MD", "a", "a"): {"flows": [("c0", "H20 tp1", 1.0)], "se_sqrt_n": 4.0, "relax_s": 5.0},
            ("P-MD", "a", "b"): {"flows": [("c1", "L20 tp2", 0.1)], "se_sqrt_n": 1.0, "relax_s": 6000.0},
            ("P-MD", "b", "b"): {"flows": [("c2", "B200 tp4", 2.0)], "se_sqrt_n": 1.0, "relax_s": 5.0}}
    solved = [{"name": "rnd-1", "span_s": 500.0, "route_laws": laws,
               "routes": [_route("a", "a", 400, 1.0, 1.3),     # 30 % at ± 20 %: noise
                          _route("a", "b", 500, 800.0, 460.0),  # a run of 500 s, its queue relaxes over 6,000 s
                          _route("b", "b", 10_000, 1.0, 1.5),   # 50 % at ± 1 %: neither
                          _route("b", "b", 10_000, 1.0, 1.05),  # within 10 %: not listed
                          _route("b", "a", 100, 1.0, 3.0)]}]    # under MIN_ROUTE_REQUESTS: not listed
    rows = [x for _, x in stats.off_routes(solved)]
    assert [(x["src"], x["dst"], x["noise"], x["window"]) for x in rows] == [
        ("b", "b", False, False), ("a", "b", False, True), ("a", "a", True, False)]
    assert rows[2]["se"] == pytest.approx(4.0 / 20.0)
    stats.print_off_routes(solved)
    out = capsys.readouterr().out
    assert "beyond 25 %: 3, of which noise 1, window 1" in out and "c1@L20 tp2" in out


def test_each_route_of_a_plan_gets_its_classes_standard_error_and_relaxation(stats):
    problem = resolve(parse_scenario(small_pdd_dict()))
    laws = stats.route_laws(problem, optimize(problem, SolveConfig(marginals=False)))
    assert laws
    for law in laws.values():
        assert law["flows"] and all(rps > 0 for _, _, rps in law["flows"])
        assert 0 < law["se_sqrt_n"] < math.inf and 0 <= law["relax_s"] < math.inf


def test_a_queued_routes_p90_spreads_by_its_relaxations_not_its_requests(stats):
    """rnd-7-25's dc4→dc4 route (−11.1 % on 7,675 requests, 136-s runs, three MI325X tp8-dep P instances whose
    queues relax over 3.8 s) read ± 1.5 % as if its requests were independent; they are not: a queue's waits are
    about independent only over a relaxation, so the run reads ~134 of them (± 11 %) and the row is noise.
    A route whose queues do not relax keeps its √n."""
    laws = {("P-MD", "dc4", "dc4"): {"flows": [("c6", "MI325X tp8-dep", 20.7)], "se_sqrt_n": 1.312,
                                     "relax_s": 3.81, "instances": 3}}
    solved = [{"name": "rnd-7-25-mixed", "span_s": 136.0, "runs": 1, "route_laws": laws,
               "routes": [_route("dc4", "dc4", 7675, 0.611, 0.543)]}]
    (_, row), = stats.off_routes(solved)
    independent = 3 * stats.INDEPENDENT_PER_RELAXATION * 136.0 / 3.81
    assert row["se"] == pytest.approx(1.312 / math.sqrt(independent), rel=1e-6) and row["noise"]
    assert stats.effective_requests(7675, 3, 136.0, 3.81, 3) == pytest.approx(3 * independent)
    assert stats.effective_requests(500, 1, 136.0, 0.0, 3) == 500


def test_the_spread_of_a_simulated_queues_p90_by_seed_is_the_effective_requests(stats, monkeypatch):
    """One simulated P instance (M/D/1 on 16K-token prompts at ρ 0.7) read over 1,000-request runs: its P side's
    P90 spreads over 16 seeds as √(0.09)/(f(q)·q) ÷ √(its :func:`effective_requests`) says, within 40 % — where
    √n of the requests puts it 3 times too narrow."""
    from placer.flows import instance
    from placer.queueing import WaitModel
    from tests.placer import test_wait_tail

    requests, rho = 1000, 0.7
    monkeypatch.setattr(test_wait_tail, "REQUESTS", requests * 10 // 9)  # it leaves the first tenth out
    im = instance(resolve(parse_scenario(small_pdd_dict())), "H100-SXM", 2)
    s = im.prefill_s(16384, 0.0)
    rps = rho / s
    law = WaitModel(rho, s, s * s)
    q = s + law.quantile_s(0.9)
    density = (law.prob_exceeds(q * 0.98 - s) - law.prob_exceeds(q * 1.02 - s)) / (0.04 * q)
    se_sqrt_n = math.sqrt(0.09) / (density * q)
    p90s = []
    for seed in range(16):
        xs = sorted(test_wait_tail.simulated_p_side_s(im, [(1.0, 16384, 0.0)], rps, seed=seed)[0])
        p90s.append(xs[int(0.9 * (len(xs) - 1))])
    mean = sum(p90s) / len(p90s)
    spread = math.sqrt(sum((x - mean) ** 2 for x in p90s) / (len(p90s) - 1)) / mean
    relax = stats.relaxation_s(rho, rps * s * s)
    predicted = se_sqrt_n / math.sqrt(stats.effective_requests(requests, 1, requests / rps, relax, 1))
    assert predicted / 1.4 < spread < predicted * 1.4, (spread, predicted)
    assert spread > 2.5 * se_sqrt_n / math.sqrt(requests)
