"""Chips off their modelled speed (issue 42 part 5): placer.perturb and `placer evaluate --perturb`."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.flows import instance
from placer.optimize import optimize
from placer.perturb import derated, speed_cases, with_speed
from tests.placer.conftest import micro_dict


def test_a_slower_chip_prefills_and_decodes_slower(micro_problem):
    slow = with_speed(micro_problem, {"H100-SXM": 0.8})
    before, after = instance(micro_problem, "H100-SXM", 1), instance(slow, "H100-SXM", 1)
    assert after.prefill_s(8192, 0.0) == pytest.approx(before.prefill_s(8192, 0.0) / 0.8, rel=0.05)
    assert after.step_s(32, 8192) == pytest.approx(before.step_s(32, 8192) / 0.8, rel=0.05)
    assert instance(slow, "L40S", 1).prefill_s(8192, 0.0) == instance(micro_problem, "L40S", 1).prefill_s(8192, 0.0)
    assert derated(micro_problem, 0.2).chips["L40S"].mem_bw_tbps == pytest.approx(
        0.8 * micro_problem.chips["L40S"].mem_bw_tbps)


def test_the_cases_are_the_corners_then_draws():
    assert len(speed_cases(["a", "b"], 0.2)) == 4
    assert speed_cases(["a", "b"], 0.2)[0] == {"a": 0.8, "b": 0.8}  # all slow first
    many = speed_cases(list("abcd"), 0.2)
    assert many[:2] == [dict.fromkeys("abcd", 0.8), dict.fromkeys("abcd", 1.2)]
    assert all(0.8 <= f <= 1.2 for case in many for f in case.values()) and many == speed_cases(list("abcd"), 0.2)


def test_evaluate_perturb_reports_p90_attainment_and_bcr_per_case(tmp_path, micro_problem):
    scenario, plan_file = tmp_path / "s.yaml", tmp_path / "plan.json"
    scenario.write_text(yaml.safe_dump(micro_dict()))
    plan_file.write_text(optimize(micro_problem).to_json())
    r = CliRunner().invoke(app, ["evaluate", str(scenario), str(plan_file), "--perturb", "0.2", "--json",
                                 "--perturb-requests", "4000"])
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)["verification"]
    assert v["perturbation"] == 0.2 and len(v["perturbed"]) == 4  # two chip types: every corner
    for run in v["perturbed"]:
        assert {"ttft_p90_s", "sla_attainment", "bcr_requests_per_usd", "speed_factors"} <= set(run)
    all_slow, all_fast = v["perturbed"][0], v["perturbed"][-1]
    assert all_slow["speed_factors"] == {"H100-SXM": 0.8, "L40S": 0.8}
    assert all_slow["ttft_p90_s"] > v["ttft_p90_s"] >= all_fast["ttft_p90_s"]
    assert all_slow["bcr_requests_per_usd"] < v["bcr_requests_per_usd"]
    tables = CliRunner().invoke(app, ["evaluate", str(scenario), str(plan_file), "--perturb", "0.2",
                                      "--perturb-requests", "2000"], env={"COLUMNS": "200"})
    assert "chip speeds off by ±20 %" in tables.stdout and "H100-SXM x0.80, L40S x0.80" in tables.stdout
