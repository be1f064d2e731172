"""Queues across windows: what an overloaded stretch leaves is carried, and makes the next one's arrivals late."""

from __future__ import annotations

import pytest

from placer.replan.backlog import carry


def test_an_overloaded_stretch_leaves_its_growth_and_its_arrivals_past_the_sla_are_late():
    # 10 req/s offered, 8 served: the queue grows 2/s; past 8 × 2 s = 16 requests an arrival waits > 2 s
    got = carry(0.0, 10.0, 8.0, 100.0, 2.0)
    assert got.backlog_out == pytest.approx(200.0)
    assert got.late_share == pytest.approx((100.0 - 8.0) / 100.0)
    assert got.wait_s == pytest.approx(25.0)


def test_a_backlog_carried_into_a_calm_stretch_drains_and_delays_the_arrivals_meanwhile():
    # 200 queued, capacity 10, offered 5: drains at 5/s; late while the queue exceeds 10 × 2 = 20: 36 s
    got = carry(200.0, 5.0, 10.0, 100.0, 2.0)
    assert got.backlog_out == pytest.approx(0.0)
    assert got.late_share == pytest.approx(36.0 / 100.0)


def test_nothing_carried_into_a_steady_stretch_changes_nothing():
    got = carry(0.0, 5.0, None, 100.0, 2.0)
    assert (got.backlog_out, got.late_share) == (0.0, 0.0)
    small = carry(10.0, 5.0, 10.0, 100.0, 2.0)  # under 20 queued: no arrival waits past the SLA
    assert small.late_share == 0.0 and small.backlog_out == 0.0


def test_a_stretch_where_nothing_serves_queues_every_arrival():
    got = carry(50.0, 5.0, 0.0, 100.0, 2.0)
    assert got.backlog_out == pytest.approx(550.0) and got.late_share == 1.0


def test_a_day_carries_the_queue_of_a_capacity_dip_into_the_figures():
    from pathlib import Path

    from placer.plan import load_plan
    from placer.replan import AdoptionRule
    from placer.replan.fleets import Startup
    from placer.replan.loop import DayConfig, run_day
    from placer.replan.timeline import Timeline
    from placer.specs import load_scenario

    root = Path(__file__).resolve().parents[3]
    scenario = load_scenario(root / "examples" / "bench-cpu.yaml")
    plan = load_plan(root / "tests" / "placer" / "replan" / "data" / "bench-cpu-plan.json")
    timeline = Timeline(inventory_changes=(("dc-b", "L40S", 1, 12.0),))  # the replanned fleet dips at 12 h
    days = {carry: run_day(scenario, timeline, plan, AdoptionRule(), Startup(),
                           DayConfig(replan_every_s=6 * 3600, requests_per_window=200, carry_queues=carry)).data
            for carry in (False, True)}
    dip = {c: d["windows"][2]["fleets"]["replanned"]["sla_attainment"] for c, d in days.items()}
    assert dip[True] < dip[False]  # the arrivals behind the dip's queue wait past the SLA
    assert days[True]["fleets"]["static"]["backlog_end_requests"] > 0  # nothing serves it from 12 h: all queue
