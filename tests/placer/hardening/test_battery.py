"""The malformed-input battery of issue 18, through the real `placer` command (typer's CliRunner
on placer.cli's app): each attack exits with its code, names the field (or file) and the
value, and never shows a traceback."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.optimize import SolveConfig, optimize
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict
from tests.placer.hardening.attacks import PLAN_ATTACKS, SCENARIO_ATTACKS, TRACE_ATTACKS, Attack, _plan, write


def _run(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


@pytest.mark.parametrize("attack", SCENARIO_ATTACKS, ids=lambda a: a.name)
def test_bad_scenario_exits_naming_the_field(tmp_path, attack):
    result = _run("optimize", write(tmp_path, attack), "--time-limit", "10", "--no-marginals")
    assert result.exit_code == attack.exit_code, result.output
    message = " ".join(result.output.split())  # Rich wraps long lines
    for name in attack.names:
        assert name in message, f"{name!r} not in {message!r}"


@pytest.mark.parametrize("attack", PLAN_ATTACKS, ids=lambda a: a.name)
def test_bad_plan_exits_naming_the_row(tmp_path, attack):
    scenario = tmp_path / "micro.yaml"
    scenario.write_text(yaml.safe_dump(micro_dict()))
    result = _run("evaluate", scenario, write(tmp_path, attack), "--time-limit", "10")
    assert result.exit_code == attack.exit_code, result.output
    message = " ".join(result.output.split())
    for name in attack.names:
        assert name in message, f"{name!r} not in {message!r}"


def test_a_plan_that_fits_still_evaluates(tmp_path):
    """The checks reject only what is wrong: the micro plan within inventory evaluates (exit 0)."""
    scenario = tmp_path / "micro.yaml"
    scenario.write_text(yaml.safe_dump(micro_dict()))
    good = Attack("ok", json.dumps(_plan()).encode(), 0, (), suffix=".json")
    result = _run("evaluate", scenario, write(tmp_path, good), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["metrics"]["cost_usd_per_h"] > 0


@pytest.mark.parametrize("attack", TRACE_ATTACKS, ids=lambda a: a.name)
def test_bad_trace_exits_naming_the_file_and_line(tmp_path, attack):
    scenario, plan = tmp_path / "micro.yaml", tmp_path / "plan.json"
    scenario.write_text(yaml.safe_dump(micro_dict()))
    plan.write_text(optimize(parse_scenario(micro_dict()), SolveConfig(marginals=False)).to_json())
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(attack.content)
    result = _run("simulate", scenario, plan, "--trace", trace, "--requests", "50")
    assert result.exit_code == attack.exit_code, result.output
    message = " ".join(result.output.split())
    for name in attack.names:
        assert name in message, f"{name!r} not in {message!r}"


DEPLOY_ATTACKS = [a for a in PLAN_ATTACKS if a.name in (
    "plan-unknown-dc", "plan-unknown-chip", "plan-one-over-inventory", "plan-x100-inventory", "plan-other-scenario",
    "plan-duplicate-rows", "plan-no-p-pool", "plan-count-1e9")]


@pytest.mark.parametrize("attack", DEPLOY_ATTACKS, ids=lambda a: a.name)
def test_deploy_dry_run_checks_the_plan_against_its_scenario(tmp_path, attack):
    """`placer deploy --dry-run --scenario` refuses what `evaluate` refuses (one check), and a
    count of 10^9 is refused before any loop over instances."""
    scenario = tmp_path / "micro.yaml"
    scenario.write_text(yaml.safe_dump(micro_dict()))
    result = _run("deploy", write(tmp_path, attack), "--dry-run", "--scenario", scenario)
    assert result.exit_code == attack.exit_code, result.output
    message = " ".join(result.output.split())
    for name in attack.names:
        assert name in message, f"{name!r} not in {message!r}"
