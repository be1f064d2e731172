"""A fleet's changes: start-up, drain, make- and break-before-make, what each is charged."""

from __future__ import annotations

import pytest

from placer.plan import PoolOut
from placer.problem import resolve
from placer.replan.fleets import FleetState, Startup
from placer.specs import parse_scenario
from tests.placer.conftest import MICRO


@pytest.fixture(scope="module")
def problem():
    return resolve(parse_scenario(MICRO))


def pools(**counts) -> dict:
    rows = {"p": PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=1, count=1),
            "d": PoolOut(role="D", datacenter="dc-b", chip="L40S", tp=1, count=1)}
    out = {}
    for name, n in counts.items():
        row = rows[name].model_copy(update={"count": n})
        out[row.key] = row
    return out


def test_a_start_up_longer_than_the_window_leaves_the_old_pools_serving_and_charges_both(problem):
    fleet = FleetState("replanned", Startup(startup_s=7200.0, drain_s=0.0))
    fleet.apply(pools(p=1, d=1), 0.0, problem)
    fleet.apply(pools(p=2, d=1), 0.0, problem)
    segments, usd = fleet.window(0.0, 3600.0, problem)
    assert [s.serving for s in segments] == [pools(p=1, d=1)]
    price = {c: problem.chips[c].price_usd_per_h for c in ("H100-SXM", "L40S")}
    assert usd == pytest.approx(2 * price["H100-SXM"] + price["L40S"])  # the starting instance is charged


def test_new_pools_serve_once_started_and_leaving_ones_are_charged_while_they_drain(problem):
    fleet = FleetState("replanned", Startup(startup_s=600.0, drain_s=60.0))
    fleet.apply(pools(p=2, d=1), 0.0, problem)
    fleet.apply(pools(p=1, d=2), 0.0, problem)
    segments, usd = fleet.window(0.0, 3600.0, problem)
    assert [(s.length_s, s.serving) for s in segments] == [(600.0, pools(p=2, d=1)), (3000.0, pools(p=1, d=2))]
    h100, l40s = problem.chips["H100-SXM"].price_usd_per_h, problem.chips["L40S"].price_usd_per_h
    union_600 = (2 * h100 + 2 * l40s) * 600 / 3600
    after = (h100 + 2 * l40s) * 3000 / 3600 + h100 * 60 / 3600  # one P drains 60 s
    assert usd == pytest.approx(union_600 + after)
    assert fleet.changes == 1 and fleet.chips_moved == 2


def test_break_before_make_dips_to_the_pools_both_plans_keep(problem):
    fleet = FleetState("replanned", Startup(startup_s=600.0, drain_s=0.0, strategy="break-before-make"))
    fleet.apply(pools(p=2, d=1), 0.0, problem)
    fleet.apply(pools(p=1, d=2), 0.0, problem)
    segments, _ = fleet.window(0.0, 3600.0, problem)
    assert segments[0].serving == pools(p=1, d=1) and segments[0].length_s == 600.0
    assert fleet.dip_s == pytest.approx(600.0)


def test_the_default_start_up_follows_the_weights_and_the_chips(problem):
    startup = Startup(load_gbyte_per_s_per_chip=0.5, warmup_s=100.0)
    one = PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=1, count=1)
    two = one.model_copy(update={"tp": 2})
    weights = problem.model.weight_bytes(problem.weight_dtype)
    assert startup.instance_s(problem, one) == pytest.approx(weights / 0.5e9 + 100.0)
    assert startup.instance_s(problem, two) == pytest.approx(weights / 1e9 + 100.0)


def test_auto_breaks_before_it_makes_when_the_free_chips_cannot_hold_the_new_instances(problem):
    fleet = FleetState("replanned", Startup(startup_s=600.0, drain_s=0.0))  # auto: the executor's rule
    fleet.apply(pools(p=4, d=1), 0.0, problem)  # every H100 of dc-a busy
    wide = PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=2, count=1)
    fleet.apply({wide.key: wide, **pools(d=1)}, 0.0, problem)
    segments, _ = fleet.window(0.0, 3600.0, problem)
    assert segments[0].serving == pools(d=1) and fleet.breaks == 1 and fleet.dip_s == pytest.approx(600.0)
    grow = FleetState("replanned", Startup(startup_s=600.0, drain_s=0.0))
    grow.apply(pools(p=2, d=1), 0.0, problem)
    grow.apply(pools(p=3, d=1), 0.0, problem)  # a free H100 holds the new instance
    assert grow.window(0.0, 3600.0, problem)[0][0].serving == pools(p=2, d=1) and grow.breaks == 0
