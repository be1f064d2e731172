"""`placer optimize --robust X` (issue 42 part 5): a plan that keeps the SLA with every chip X slower."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.optimize import optimize
from placer.perturb import derated
from placer.problem import resolve
from placer.robust import optimize_robust
from placer.sim.config import SimConfig
from placer.sim.engine import simulate
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict

#: The micro scenario at a load its nominal plan carries but 20 %-slower chips would not.
LOAD = {**micro_dict()["workload"], "arrival_rps": 4.0}


def test_the_robust_plan_keeps_the_sla_on_slower_chips_where_the_nominal_one_does_not():
    problem = resolve(parse_scenario(micro_dict(workload=LOAD)))
    nominal = optimize(problem)
    robust = optimize_robust(problem, 0.2, nominal=nominal)
    slow, sim = derated(problem, 0.2), SimConfig(requests=6000)
    sla = problem.ttft_p90_s
    assert simulate(slow, nominal, sim)["ttft_p90_s"] > sla  # the nominal plan breaks when chips are 20 % slower
    assert simulate(slow, robust, sim)["ttft_p90_s"] <= sla  # the robust one holds
    r = robust.robust
    assert r.slowdown == 0.2 and r.sla_met_slow and r.ttft_p90_s_slow <= sla
    assert r.nominal_bcr_requests_per_usd == nominal.metrics.bcr_requests_per_usd
    assert 0 < r.bcr_cost < 0.5 and robust.metrics.bcr_requests_per_usd < nominal.metrics.bcr_requests_per_usd


def test_optimize_robust_reports_what_it_costs(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(micro_dict(workload=LOAD)))
    r = CliRunner().invoke(app, ["optimize", str(scenario), "--robust", "0.2", "--no-marginals", "--no-verify",
                                 "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert plan["robust"]["slowdown"] == 0.2 and plan["robust"]["bcr_cost"] > 0
    assert any(n.startswith("robust: planned with every chip 20 % slower") for n in plan["notes"])


def test_a_robust_plan_that_cannot_exist_says_at_what_slowdown(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(micro_dict()))  # 6 req/s: 20 %-slower chips cannot carry it
    r = CliRunner().invoke(app, ["optimize", str(scenario), "--robust", "0.2", "--no-marginals"])
    assert r.exit_code == 3, r.output
    assert "with every chip 20 % slower (--robust)" in r.stderr
