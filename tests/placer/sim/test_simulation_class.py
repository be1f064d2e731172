"""simulate(simulation_class=...): a Simulation subclass runs through the one entry point (its plan
routed, its warnings added), so the request log (placer.sim.records) repeats none of simulate()."""

from __future__ import annotations

from placer.optimize import SolveConfig, optimize
from placer.sim import SimConfig, simulate
from placer.sim.engine import Simulation
from placer.specs import parse_scenario
from tests.placer.conftest import MICRO


class Counting(Simulation):
    finished = 0

    def _finish(self, req, t: float) -> None:
        Counting.finished += 1
        super()._finish(req, t)


def test_a_subclass_runs_through_simulate_with_its_warnings():
    scenario = parse_scenario(MICRO)
    plan = optimize(scenario, SolveConfig(marginals=False))
    Counting.finished = 0
    result = simulate(scenario, plan, SimConfig(requests=200, seed=0), simulation_class=Counting)
    assert Counting.finished == result["requests"] - result["rejected_requests"] > 0
    assert "warnings" in result.data
    plain = simulate(scenario, plan, SimConfig(requests=200, seed=0))
    assert plain["requests"] == result["requests"]
