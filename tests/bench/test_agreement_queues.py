"""``bench_agreement.py --breakdown`` and ``--queues`` on the flagship (issue 42): each P pool of a route is
weighed against its own queue's law, so a set queue whose classes span two pools at different utilisations
reads as the law it is, not as one pool's law against both pools' requests."""

from __future__ import annotations

import re

import pytest

from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.specs import load_scenario
from tests.placer.conftest import EXAMPLES

#: Rows with at least this many simulated requests are compared: the heavy queue at ρ 0.8 on one instance is a
#: slow-mixing M/G/1 (the flagship's tp16 one: 1,100 requests 17 % under its law on seed 7, where 36,000 on one
#: instance come within 5 %, tests/placer/test_set_queue_law.py).
MIN_ROWS = 1000
#: The simulated mean P wait of a row within this share of its law's (+ 10 ms).
TOLERANCE = 0.2


@pytest.fixture(scope="module")
def agreement(bench_path):
    """The bench script's module."""
    import bench_agreement

    return bench_agreement


@pytest.fixture(scope="module")
def flagship():
    problem = resolve(load_scenario(EXAMPLES / "pdd-two-dc.yaml"))
    return problem, optimize(problem, SolveConfig(marginals=False))


def test_breakdown_weighs_each_p_pool_against_its_own_queue(agreement, flagship, capsys):
    """The flagship's heavy set queue (hit-0-90 + anomalous) lies on a tp16 and a tp32 pool; the breakdown printed
    one row per class against the first pool's law (hit-0-90: simulated mean wait 1.42 s, law 0.76 s): the two
    pools' requests mixed, the tp16 prefill taken off the tp32 requests. Per pool, each mean wait is its law's."""
    problem, plan = flagship
    times: dict = {}
    with agreement.timed_transfers(times):
        simulate(problem, plan, SimConfig(requests=30_000, seed=7))
    agreement.print_breakdown(problem, plan, times)
    lines = capsys.readouterr().out.splitlines()
    compared = 0
    for head, waits in zip(lines[::2], lines[1::2]):
        n = int(re.search(r"(\d+) req", head).group(1))
        sim, law = map(float, re.search(r"P wait sim mean ([\d.]+) .* law mean ([\d.]+)", waits).groups())
        if n >= MIN_ROWS:
            compared += 1
            assert abs(sim - law) <= TOLERANCE * law + 0.01, head
    assert compared >= 4


def test_queues_view_reads_the_set_queues_law_and_the_decoders_kv_wait_apart(agreement, flagship):
    """``--queues``: every P instance's simulated P side past prefill beside its queue's law (the set queues'
    classes within 20 % where they have 1,000 requests or more), and each class's planned TTFT P90 with and
    without the decoders' KV wait (the flagship's decoders do not wait for KV: the two are equal)."""
    from agreement_queues import class_rows, queue_rows, simulate_queues

    problem, plan = flagship
    _result, sim, sides, ttfts = simulate_queues(problem, plan, SimConfig(requests=30_000, seed=7))
    rows = [r for r in queue_rows(problem, plan, sim, sides) if r["n"] >= MIN_ROWS]
    assert any(q.startswith("set:") for r in rows for q in r["queues"])
    for r in rows:
        assert abs(r["sim_mean_s"] - r["law_mean_s"]) <= TOLERANCE * r["law_mean_s"] + 0.01, r
    classes = class_rows(problem, plan, ttfts)
    assert classes[-1]["cls"] == "mix" and len(classes) == len(problem.classes) + 1
    assert all(r["ilp_no_kv_p90_s"] == pytest.approx(r["ilp_p90_s"]) for r in classes)


def test_routes_view_takes_the_kv_wait_and_the_line_off_each_route(agreement, flagship):
    """``--queues``' route rows: each route's planned P90 with the decoders' KV wait and the line's excess taken
    off in turn (which law a route's error is in, issue 42). The flagship's routes over its line lose their
    excess (their P90 drops), its same-datacenter routes none; no row grows when a part is taken off."""
    from agreement_queues import route_rows

    from placer.sim.verify import agreement as agree

    problem, plan = flagship
    routes = agree(problem, plan, simulate(problem, plan, SimConfig(requests=3_000, seed=7)))["routes"]
    rows = route_rows(problem, plan, routes)
    assert len(rows) == len(routes)
    for r in rows:
        assert r["ilp_no_kv_line_p90_s"] <= r["ilp_no_kv_p90_s"] * (1 + 1e-6) <= r["ilp_ttft_p90_s"] * (1 + 1e-5)
        if r["src"] == r["dst"]:
            assert r["ilp_no_kv_line_p90_s"] == pytest.approx(r["ilp_no_kv_p90_s"])
    assert any(r["src"] != r["dst"] and r["ilp_no_kv_line_p90_s"] < 0.95 * r["ilp_no_kv_p90_s"] for r in rows)


def test_a_queue_rows_p90_carries_the_spread_its_queues_relaxations_give_it(agreement):
    """``--queues``' P90 rows carry their standard error: rnd-7-25's MI325X tp8-dep group (three instances at ρ
    0.76) read over one 136-s run makes ~134 of its 9,000 requests' waits independent — ± 12 % on its P90, where
    its rows read −8…−14 % and 300,000 requests on one instance alone meet the law within 3 %. Here a queue like
    it (35-ms mean prefill, service cv² 5): ± 15 %, ten times the ± 1.6 % of 9,000 independent requests, which a
    run long enough for every request to count reads."""
    from agreement_queues import p90_se

    from placer.queueing import WaitModel

    law = WaitModel(0.76, 0.035, 0.035 ** 2 * 6.0)
    short = p90_se(law, 9_000, 3, 136.0)
    iid = p90_se(law, 9_000, 3, 1e9)
    assert 0.08 < short < 0.2
    assert short > 5 * iid
    assert iid == pytest.approx(p90_se(law, 9_000, 1, 1e9))
