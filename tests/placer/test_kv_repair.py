"""A plan that misses its SLA with decoders waiting for KV is re-solved with less load on them (placer.kv_repair):
rnd-7-12-relay's H20 decoders — the MILP's linear KV row lets two tp1 instances hold the 46K-token class at the
optimum's ratio, the evaluation finds half their arrivals waiting for room (P90 23 s against a 1.15 s SLA; the
simulator agrees the plan misses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer import kv_repair
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.specs import load_scenario

SCENARIO = Path(__file__).parents[1] / "data" / "scenarios" / "kv-repair-h20.yaml"


@pytest.fixture(scope="module")
def problem():
    return resolve(load_scenario(SCENARIO))


def test_the_repaired_plan_meets_the_sla_in_its_promise_and_in_the_simulator(problem):
    plan = optimize(problem, SolveConfig(marginals=False))
    assert plan.metrics.sla_met
    assert any(n.startswith("KV repair (placer.kv_repair)") for n in plan.notes)
    assert not kv_repair.waiting_pools(problem, plan)
    sim = simulate(problem, plan, SimConfig(requests=20_000, seed=7))
    assert sim["ttft_p90_s"] <= problem.ttft_p90_s


def test_without_the_repair_the_plan_misses_and_says_so(problem, monkeypatch):
    """The plan the MILP's ratio picks first (the cover rows' tie-breaking picks it): its decoders wait."""
    monkeypatch.setattr(kv_repair, "ROUNDS", 0)
    plan = optimize(problem, SolveConfig(marginals=False))
    assert plan.metrics.sla_met is False
    assert max(kv_repair.waiting_pools(problem, plan).values()) > 0.3
