"""An inventory change at an hour: each window's scenario holds it, and every fleet over it shrinks."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import InputError
from placer.plan import PoolOut, load_plan
from placer.problem import resolve
from placer.replan.fleets import FleetState, Startup, within_inventory
from placer.replan.timeline import Timeline, windows
from placer.specs import load_scenario, parse_scenario
from tests.placer.conftest import MICRO

ROOT = Path(__file__).resolve().parents[3]


def _row(role: str, n: int, chip: str = "H100-SXM", dc: str = "dc-a") -> PoolOut:
    return PoolOut(role=role, datacenter=dc, chip=chip, tp=1, count=n)


def test_windows_from_the_hour_on_hold_the_new_inventory():
    scenario = parse_scenario(MICRO)
    wins = windows(scenario, Timeline(window_s=6 * 3600, inventory_changes=(("dc-a", "H100-SXM", 1, 12.0),)))
    held = [w.scenario.datacenters[0].inventory["H100-SXM"] for w in wins]
    assert held == [4, 4, 1, 1]


def test_an_inventory_change_naming_an_unknown_datacenter_is_an_input_error():
    with pytest.raises(InputError, match="dc-x"):
        windows(parse_scenario(MICRO), Timeline(inventory_changes=(("dc-x", "H100-SXM", 1, 1.0),)))
    with pytest.raises(InputError, match="inventory_changes"):
        Timeline(inventory_changes=(("dc-a", "H100-SXM", -1, 1.0),))


def test_a_fleet_over_the_new_inventory_loses_instances_at_once_from_its_largest_pool():
    scenario = parse_scenario(MICRO)
    before = resolve(scenario)
    after = resolve(windows(scenario, Timeline(window_s=12 * 3600,
                                               inventory_changes=(("dc-a", "H100-SXM", 2, 12.0),)))[1].scenario)
    p, d = _row("P", 3), _row("D", 2, "L40S", "dc-b")
    fleet = FleetState("static", Startup(startup_s=60.0))
    fleet.apply({p.key: p, d.key: d}, 0.0, before)
    assert fleet.fit_inventory(before) == 0
    assert fleet.fit_inventory(after) == 1 and fleet.chips_lost == 1
    assert fleet.serving[p.key].count == 2 and fleet.serving[d.key].count == 2  # dc-b untouched
    assert within_inventory(after, {p.key: _row("P", 1)}) == {p.key: _row("P", 1)}  # what fits stays


def test_a_day_with_an_inventory_cut_the_static_plan_loses_its_chips_and_the_replanned_fleet_re_solves():
    from placer.replan import AdoptionRule
    from placer.replan.loop import DayConfig, run_day

    scenario = load_scenario(ROOT / "examples" / "bench-cpu.yaml")
    plan = load_plan(ROOT / "tests" / "placer" / "replan" / "data" / "bench-cpu-plan.json")
    timeline = Timeline(inventory_changes=(("dc-b", "L40S", 1, 12.0),))
    day = run_day(scenario, timeline, plan, AdoptionRule(), Startup(),
                  DayConfig(replan_every_s=6 * 3600, requests_per_window=200)).data
    static, replanned = day["fleets"]["static"], day["fleets"]["replanned"]
    assert static["chips_lost"] >= 1 and static["sla_attainment"] < 0.75  # half a day with nothing to prefill
    assert replanned["changes"] >= 1 and replanned["sla_attainment"] > static["sla_attainment"] + 0.2
    assert day["inventory_changes"] == [{"datacenter": "dc-b", "chip": "L40S", "chips": 1, "hour": 12.0}]
