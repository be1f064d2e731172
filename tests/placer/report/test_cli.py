"""`placer report`: exit 0 with the files written; exit 2 naming the bad input, no traceback."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from placer.cli import report as cli_report


@pytest.fixture(scope="module")
def app():
    """The real `placer` app when the lead has hooked the command in, else a fresh one."""
    from placer.cli import app as placer_app

    if any(c.name == "report" for c in placer_app.registered_commands):
        return placer_app
    fresh = typer.Typer(pretty_exceptions_enable=False)

    @fresh.callback()
    def _root() -> None:
        """placer (test harness)"""

    cli_report.register(fresh)
    return fresh


@pytest.fixture
def plan_file(tmp_path, micro_plan):
    path = tmp_path / "plan.json"
    path.write_text(micro_plan.to_json())
    return path


def _run(app, *args):
    return CliRunner().invoke(app, ["report", *map(str, args)])


def test_a_plan_alone_writes_the_report_and_notes_the_missing_scenario(app, plan_file, tmp_path):
    result = _run(app, plan_file, "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert "report.html" in result.output and "--scenario" in result.output
    html = (tmp_path / "r" / "report.html").read_text()
    assert "micro: placement plan" in html


def test_with_the_scenario_the_baselines_and_simulation_are_drawn(app, plan_file, tmp_path):
    from tests.placer.service.dashboard.support import MICRO

    scenario = tmp_path / "micro.json"
    scenario.write_text(json.dumps(MICRO))
    result = _run(app, plan_file, "--scenario", scenario, "--out", tmp_path / "r", "--requests", 400)
    assert result.exit_code == 0, result.output
    assert {p.name for p in (tmp_path / "r").iterdir()} >= {"baselines.png", "ttft-cdf.svg", "timeline.png"}


@pytest.mark.parametrize("extra, message", [
    (["--requests", "0"], "--requests must be >= 1"),
    (["--time-limit", "-1"], "--time-limit must be a positive"),
    (["--sweep", "missing.csv"], "--sweep: cannot read"),
    (["--scenario", "missing.yaml"], "missing.yaml"),
])
def test_bad_input_exits_2_naming_it(app, plan_file, tmp_path, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    result = _run(app, plan_file, "--out", tmp_path / "r", *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_a_missing_or_broken_plan_exits_2(app, tmp_path):
    result = _run(app, tmp_path / "nope.json", "--out", tmp_path / "r")
    assert result.exit_code == 2 and "cannot read plan file" in result.output
    broken = tmp_path / "broken.json"
    broken.write_text('{"scenario": "x", "pools": [{"role": "Q"}]}')
    result = _run(app, broken, "--out", tmp_path / "r")
    assert result.exit_code == 2 and "pools.0.role" in result.output and "Traceback" not in result.output
