"""A plan that misses its SLA with decoders waiting for KV is re-solved with less load on them (placer.kv_repair):
rnd-7-12-relay's H20 decoders — the MILP's linear KV row lets two tp1 instances hold the 46K-token class at the
optimum's ratio, the evaluation finds half their arrivals waiting for room (P90 23 s against a 1.15 s SLA; the
simulator agrees the plan misses)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from placer import kv_repair
from placer.cli import app
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
    # no round to try, time left: the note says the decoders wait, and does not blame the time limit
    assert any(n.startswith(kv_repair.NOTE) and "decoders wait for KV room" in n for n in plan.notes)
    assert not kv_repair.ran_out_of_time(plan)


def test_a_repair_out_of_time_says_a_longer_limit_may_meet_the_sla(problem, monkeypatch, tmp_path):
    """The first plan stands when no re-solve fits in what is left of the command's time (rnd-31-5: one re-solve of
    ~8 s, a 16-s limit); the plan's note and the command's error say a longer --time-limit may find one that meets it,
    not only "add capacity"."""
    monkeypatch.setattr(kv_repair, "MIN_RESOLVE_S", 1e9)  # never time enough for a re-solve
    plan = optimize(problem, SolveConfig(marginals=False))
    assert plan.metrics.sla_met is False and kv_repair.ran_out_of_time(plan)
    note = next(n for n in plan.notes if n.startswith(kv_repair.NOTE))
    assert "no re-solve" in note and "a longer --time-limit" in note
    assert all(f"{100 * w:.0f} %" in note for w in kv_repair.waiting_pools(problem, plan).values())
    r = CliRunner().invoke(app, ["optimize", str(SCENARIO), "--no-marginals", "--no-verify"], env={"COLUMNS": "200"})
    assert r.exit_code == 3, r.output
    assert "(a longer --time-limit, add capacity" in " ".join(r.stderr.split())

