"""The malformed-input battery of issue 18, through the real `placer` command (typer's CliRunner
on placer.cli's app): each attack exits with its code, names the field (or file) and the
value, and never shows a traceback."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.placer.conftest import micro_dict
from tests.placer.hardening.attacks import PLAN_ATTACKS, SCENARIO_ATTACKS, Attack, _plan, write


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
