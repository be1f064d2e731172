"""One apply rule, two adapters: the executor's live change and the simulator's fleet choose alike."""

from __future__ import annotations

import pytest

from placer.change_strategy import BREAK_BEFORE_MAKE, MAKE_BEFORE_BREAK, choose_strategy
from placer.plan import PoolOut
from placer.problem import resolve
from placer.replan.fleets import FleetState, Startup, fits_beside
from placer.specs import parse_scenario
from tests.placer.conftest import MICRO


def test_the_rule_makes_before_it_breaks_only_when_the_free_resources_hold_the_added_ones():
    assert choose_strategy({"chip:A": 2}, {"chip:A": 2}, {}).strategy == MAKE_BEFORE_BREAK
    got = choose_strategy({"chip:A": 3}, {"chip:A": 2}, {"chip:A": 1})
    assert got.strategy == BREAK_BEFORE_MAKE and got.short == {"chip:A": 1} and got.feasible
    refused = choose_strategy({"chip:A": 4}, {"chip:A": 2}, {"chip:A": 1})
    assert not refused.feasible and refused.still_short == {"chip:A": 1}
    assert choose_strategy({"chip:A": 99}, None, {}).strategy == MAKE_BEFORE_BREAK  # not accounted


@pytest.fixture(scope="module")
def problem():
    return resolve(parse_scenario(MICRO))


def _pools(p: int) -> dict:
    row = PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=1, count=p)
    return {row.key: row}


def test_the_simulated_fleet_applies_the_executors_rule_on_the_datacenters_free_chips(problem):
    have = problem.dc("dc-a").inventory["H100-SXM"]
    assert fits_beside(problem, _pools(have - 1), _pools(1))
    assert not fits_beside(problem, _pools(have - 1), _pools(2))
    fleet = FleetState("replanned", Startup(startup_s=60.0))
    fleet.apply(_pools(have - 1), 0.0, problem)
    fleet.apply(_pools(have), 0.0, problem)  # one more: beside the running ones
    assert fleet.strategy == MAKE_BEFORE_BREAK and fleet.breaks == 0


def test_the_executor_takes_its_strategy_from_the_same_rule():
    from executor import elastic

    assert elastic.choose_by_resources is choose_strategy
    assert (elastic.MAKE_BEFORE_BREAK, elastic.BREAK_BEFORE_MAKE) == (MAKE_BEFORE_BREAK, BREAK_BEFORE_MAKE)
