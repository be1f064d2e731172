"""The flagship's neighbourhood, simulated (issue 45, parts 3 and 5): on the report's chips and
prices, PDD is behind the 910B-only cluster over a 25 Gbit/s line but ahead over a 200 Gbit/s one,
and the simulator agrees with the plan on the side — the setting docs/examples.md names for the
report's BCR figure."""

from __future__ import annotations

import pytest

from placer.baselines import solve_baseline
from placer.knobs import variant
from placer.optimize import SolveConfig, optimize
from placer.sim.config import SimConfig
from placer.sim.engine import simulate
from placer.specs import load_scenario
from tests.placer.frontier.test_knobs import FLAGSHIP

CONFIG = SolveConfig("bcr", "ortools", 15.0, marginals=False)
SIM = SimConfig(requests=4000, seed=3)


def _sim_bcr(problem, plan) -> float:
    return simulate(problem, plan, SIM)["bcr_requests_per_usd"]


@pytest.mark.slow
def test_a_wide_line_turns_the_flagship_round_in_the_plan_and_in_simulation():
    scenario = load_scenario(FLAGSHIP)
    thin, wide = variant(scenario, "gbit", 25.0), variant(scenario, "gbit", 200.0)
    base = solve_baseline(thin, "same-dc-pd", CONFIG)  # no line in its plan: the same at any width
    base_sim = _sim_bcr(thin, base)
    pdd_thin, pdd_wide = optimize(thin, CONFIG), optimize(wide, CONFIG)
    assert pdd_thin.metrics.bcr_requests_per_usd < base.metrics.bcr_requests_per_usd < \
        pdd_wide.metrics.bcr_requests_per_usd
    assert _sim_bcr(thin, pdd_thin) < base_sim < _sim_bcr(wide, pdd_wide)
    # over the wide line every prompt is prefilled on the 910Bs and decoded on GPU-B (the report's shape)
    roles = {(p.role, p.chip) for p in pdd_wide.pools if p.count > 0}
    assert ("P", "GPU-B") not in roles and ("MD", "GPU-B") in roles
