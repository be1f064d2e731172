"""Every new scenario and plan option of fleets rejected with a named error when invalid, and
single-model scenarios and plans unchanged."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from placer.errors import InputError
from placer.optimize import SolveConfig, evaluate_plan, optimize
from placer.plan import parse_plan
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import EXAMPLES, ROOT

CONFIG = SolveConfig(time_limit_s=60, marginals=False)


def _error(data: dict) -> str:
    with pytest.raises(InputError) as err:
        parse_scenario(data)
    return str(err.value)


def test_duplicate_model_names_are_named(fleet_data):
    fleet_data["models"][1]["name"] = "chat"
    assert "models: duplicate model names: chat" in _error(fleet_data)


def test_an_empty_models_list_is_rejected(fleet_data):
    fleet_data["models"] = []
    assert "models: the list is empty" in _error(fleet_data)


def test_a_fleet_gives_model_workload_sla_and_dtypes_per_model_only(fleet_data):
    for field, value in (("model", "llama-3.1-8b"), ("kv_dtype", "fp8"), ("sla", {"ttft_p90_s": 1, "tpot_s": 0.1})):
        data = {**fleet_data, field: value}
        assert f"models: a fleet gives {field} per model, not at the top level" in _error(data)


def test_a_single_model_scenario_still_needs_its_model_workload_and_sla(fleet_data):
    data = {k: v for k, v in fleet_data.items() if k != "models"}
    assert "scenario needs 'model', 'workload', 'sla' (or a 'models' list)" in _error(data)


def test_a_models_entry_is_checked_like_a_scenario(fleet_data):
    fleet_data["models"][0]["workload"]["classes"][0]["share"] = 0.5
    assert "models.0.workload" in _error(fleet_data) and "shares must sum to 1" in _error(fleet_data)
    fleet_data["models"][0]["workload"]["classes"][0]["share"] = 0.8
    fleet_data["models"][1]["model"] = "no-such-model"
    with pytest.raises(InputError, match=r"models\[1\] \(code\).*no-such-model"):
        optimize(parse_scenario(fleet_data), CONFIG)


def test_single_model_commands_refuse_a_fleet_by_name(fleet_data):
    with pytest.raises(InputError, match="lists 2 models \\(a fleet\\)"):
        resolve(parse_scenario(fleet_data))


@pytest.fixture(scope="module")
def fleet_plan_json() -> dict:
    return json.loads(optimize(parse_scenario(_example()), CONFIG).to_json())


def _example() -> dict:
    import yaml

    return yaml.safe_load((EXAMPLES / "fleet-two-models.yaml").read_text())


@pytest.mark.parametrize("rows", ["pools", "routes"])
def test_a_plan_row_naming_an_unknown_or_no_model_is_rejected(fleet_plan_json, rows):
    scenario = parse_scenario(_example())
    bad = json.loads(json.dumps(fleet_plan_json))
    bad[rows][0]["model"] = "vision"
    with pytest.raises(InputError, match=rf"{rows}\[0\]\.model: unknown model 'vision'; models: chat, code"):
        evaluate_plan(scenario, parse_plan(bad), CONFIG)
    del bad[rows][0]["model"]
    with pytest.raises(InputError, match=rf"{rows}\[0\]\.model: a fleet plan names the model of every row"):
        evaluate_plan(scenario, parse_plan(bad), CONFIG)


def test_a_single_model_plan_naming_a_model_is_rejected():
    from placer.specs import load_scenario

    scenario = load_scenario(EXAMPLES / "pdd-two-dc.yaml")
    plan = parse_plan({"scenario": scenario.name, "pools": [
        {"role": "P", "datacenter": "dc-a", "chip": "Ascend-910B", "tp": 16, "count": 1, "model": "chat"}]})
    with pytest.raises(InputError, match=r"pools\[0\]\.model: unknown model 'chat'.*plans one model"):
        evaluate_plan(scenario, plan, CONFIG)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placer.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "160"})


def test_cli_prints_each_models_metrics_and_evaluates_the_fleet_plan(tmp_path):
    out = tmp_path / "plan.json"
    done = _cli("optimize", str(EXAMPLES / "fleet-two-models.yaml"), "--out", str(out), "--no-marginals")
    assert done.returncode == 0, done.stderr
    assert "per model" in done.stdout and "chat" in done.stdout and "code" in done.stdout
    plan = json.loads(out.read_text())
    assert set(plan["models"]) == {"chat", "code"} and all("model" in p for p in plan["pools"])
    done = _cli("evaluate", str(EXAMPLES / "fleet-two-models.yaml"), str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metrics"]["bcr_requests_per_usd"] == pytest.approx(
        plan["metrics"]["bcr_requests_per_usd"], rel=1e-3)
    bad = json.loads(out.read_text())
    bad["pools"][0]["model"] = "vision"
    out.write_text(json.dumps(bad))
    done = _cli("evaluate", str(EXAMPLES / "fleet-two-models.yaml"), str(out))
    assert done.returncode == 2 and "pools[0].model: unknown model 'vision'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_single_model_plan_has_no_fleet_keys():
    from placer.specs import load_scenario

    plan = json.loads(optimize(load_scenario(EXAMPLES / "pdd-two-dc.yaml"), CONFIG).to_json())
    assert "models" not in plan
    assert not any("model" in row for rows in ("pools", "routes", "assignments") for row in plan[rows])
