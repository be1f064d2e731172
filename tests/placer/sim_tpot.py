"""The simulator's TPOT as the planner states it, for tests that put the two side by side."""

from __future__ import annotations

from placer.sim import SimConfig
from placer.sim.engine import Simulation, simulate


def simulated_tpot(scenario, plan, config: SimConfig) -> tuple[float, dict]:
    """The simulator's TPOT over tokens — Σ (last − first token) ÷ Σ (output − 1) over the requests past its
    warm-up, the planner's statistic — and the run's result data."""
    spans = [0.0, 0]

    class Timed(Simulation):
        def _finish(self, req, t):
            if req.rid >= self.warm_n and req.n_out > 1:
                spans[0] += t - req.t_first
                spans[1] += req.n_out - 1
            super()._finish(req, t)

    result = simulate(scenario, plan, config, simulation_class=Timed)
    return spans[0] / spans[1], (result.data if hasattr(result, "data") else result)
