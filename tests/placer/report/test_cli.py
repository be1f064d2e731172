"""`placer report`: exit 0 with the files written; exit 2 naming the bad input, no traceback."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app


@pytest.fixture
def plan_file(tmp_path, micro_plan):
    path = tmp_path / "plan.json"
    path.write_text(micro_plan.to_json())
    return path


def _run(*args):
    return CliRunner().invoke(app, ["report", *map(str, args)])


def test_a_plan_alone_writes_the_report_and_notes_the_missing_scenario(plan_file, tmp_path):
    result = _run(plan_file, "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert "report.html" in result.output and "--scenario" in result.output
    html = (tmp_path / "r" / "report.html").read_text()
    assert "micro: placement plan" in html


def test_with_the_scenario_the_baselines_and_simulation_are_drawn(plan_file, tmp_path):
    from tests.placer.service.dashboard.support import MICRO

    scenario = tmp_path / "micro.json"
    scenario.write_text(json.dumps(MICRO))
    result = _run(plan_file, "--scenario", scenario, "--out", tmp_path / "r", "--requests", 400)
    assert result.exit_code == 0, result.output
    assert {p.name for p in (tmp_path / "r").iterdir()} >= {"baselines.png", "ttft-cdf.svg", "timeline.png"}


@pytest.mark.parametrize("extra, message", [
    (["--requests", "0"], "--requests must be >= 1"),
    (["--time-limit", "-1"], "--time-limit must be a positive"),
    (["--sweep", "missing.csv"], "--sweep: cannot read"),
    (["--scenario", "missing.yaml"], "missing.yaml"),
])
def test_bad_input_exits_2_naming_it(plan_file, tmp_path, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    result = _run(plan_file, "--out", tmp_path / "r", *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_a_missing_or_broken_plan_exits_2(tmp_path):
    result = _run(tmp_path / "nope.json", "--out", tmp_path / "r")
    assert result.exit_code == 2 and "cannot read plan file" in result.output
    broken = tmp_path / "broken.json"
    broken.write_text('{"scenario": "x", "pools": [{"role": "Q"}]}')
    result = _run(broken, "--out", tmp_path / "r")
    assert result.exit_code == 2 and "pools.0.role" in result.output and "Traceback" not in result.output
