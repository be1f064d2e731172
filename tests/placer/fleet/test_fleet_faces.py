"""A fleet through every face: the API plans it; commands that take one model refuse it by name."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.placer.service.api.support import AUTH, make_settings, solved_plan


@pytest.fixture
def fleet_files(tmp_path, fleet_data):
    """The fleet scenario and its plan (placer optimize --json) as files."""
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(yaml.safe_dump(fleet_data))
    plan = tmp_path / "fleet-plan.json"
    r = subprocess.run([sys.executable, "-m", "placer.cli", "optimize", str(scenario), "--json", "--no-marginals"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    plan.write_text(r.stdout)
    return scenario, plan


def test_the_api_plans_a_fleet(tmp_path, fleet_data):
    from fastapi.testclient import TestClient

    from placer.service.api import create_app

    app = create_app(make_settings(f"sqlite:///{tmp_path / 'api.db'}"))
    with TestClient(app, headers=AUTH) as client:
        _, plan = solved_plan(client, {"scenario": fleet_data, "time_limit_s": 60})
    names = {m["name"] for m in fleet_data["models"]}
    assert set(plan["models"]) == names
    assert {p["model"] for p in plan["pools"] if p["count"] > 0} == names


@pytest.mark.parametrize("argv", [
    ["sweep", "{scenario}", "--vary", "load", "--values", "1", "--no-ray", "--out", "{tmp}/s"],
    ["frontier", "{scenario}", "--vary", "tpot", "--values", "0.05", "--no-ray"],
], ids=lambda a: a[0])
def test_commands_that_take_one_model_refuse_a_fleet_by_name(fleet_files, tmp_path, argv):
    scenario, plan = fleet_files
    args = [a.format(scenario=scenario, plan=plan, tmp=tmp_path) for a in argv]
    r = subprocess.run([sys.executable, "-m", "placer.cli", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    said = r.stderr + r.stdout
    assert "fleet" in said and ("one model" in said or "single-model" in said), said
