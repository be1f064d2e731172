"""Report fixtures: the micro scenario (and a small one whose plan relays) solved once per
session; one full report built once and read by several tests."""

from __future__ import annotations

import copy
import math

import pytest

from tests.placer.service.dashboard.support import MICRO
from tests.placer.sim.conftest import SMALL_PDD

#: The simulator tests' relaying scenario: low-hit prompts cannot cross its 10 Gbit/s line
#: within the SLA, so the plan sends them P→RLD→MD and RelayDecode emits a few per cent.
RELAY = {**SMALL_PDD, "name": "relay"}


@pytest.fixture(scope="session")
def micro_scenario():
    from placer.specs import parse_scenario

    return parse_scenario(copy.deepcopy(MICRO))


@pytest.fixture(scope="session")
def micro_plan(micro_scenario):
    from placer.optimize import SolveConfig, optimize

    return optimize(micro_scenario)


@pytest.fixture(scope="session")
def relay_problem():
    from placer.problem import resolve
    from placer.specs import parse_scenario

    return resolve(parse_scenario(copy.deepcopy(RELAY)))


@pytest.fixture(scope="session")
def relay_plan(relay_problem):
    from placer.optimize import SolveConfig, optimize

    return optimize(relay_problem, SolveConfig(marginals=False))


def bathtub_rows() -> list[dict]:
    """Sweep rows shaped like the report's bathtub: high at both ends, a dip between, one
    variant without a plan."""
    from placer.sim.sweep import COLUMNS

    rows = []
    for i, hit in enumerate([0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.99]):
        bcr = 900 - 700 * math.sin(math.pi * hit) + 2000 * max(0.0, hit - 0.85)
        ok = i != 2
        rows.append({**{c: math.nan for c in COLUMNS}, "value": hit, "status": "ok" if ok else "no plan", "mean_hit_rate": hit,
                     "ilp_bcr_requests_per_usd": bcr * 1.05 if ok else math.nan,
                     "sim_bcr_requests_per_usd": bcr if ok else math.nan,
                     "error": "" if ok else "infeasible: WAN bandwidth binds"})
    return rows


@pytest.fixture(scope="session")
def sweep_csv(tmp_path_factory):
    from placer.sim.sweep import write_outputs

    csv_path, _ = write_outputs(bathtub_rows(), tmp_path_factory.mktemp("sweep"), "hit-mean")
    return csv_path


@pytest.fixture(scope="session")
def full_report(tmp_path_factory, micro_plan, micro_scenario, sweep_csv):
    """Every figure: the micro plan with its scenario and a sweep (1,500 simulated requests)."""
    from placer.report import build_report

    out = tmp_path_factory.mktemp("report")
    return build_report(micro_plan, out, micro_scenario, sweep_csv, requests=1500, seed=3, time_limit_s=20)
