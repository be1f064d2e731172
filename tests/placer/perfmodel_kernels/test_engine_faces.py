"""``engine`` through the faces: the planner's instances, the plan JSON, ``simulate --engine``, the
export warning, ``with_engine`` (issue 41, part 3)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli.app import app
from placer.cli.options import with_engine
from placer.errors import InputError
from placer.export.engine import engine_warning
from placer.flows import instance
from placer.optimize import optimize
from placer.perfmodel.engines import KernelForward
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict
from tests.placer.export.conftest import PLANS

runner = CliRunner()


def test_the_planner_builds_its_instances_with_the_scenario_engine(tiny_tables):
    problem = resolve(parse_scenario(micro_dict(engine="vllm")))
    im = instance(problem, "H100-SXM", 1)
    assert isinstance(im, KernelForward)
    assert im.source_of_step(8, 1000).startswith("transferred from h200_sxm vllm 0.24.0")
    plain = instance(resolve(parse_scenario(micro_dict())), "H100-SXM", 1)
    assert not isinstance(plain, KernelForward)


def test_the_plan_records_the_engine_its_numbers_assume(tiny_tables):
    plan = optimize(parse_scenario(micro_dict(engine="vllm")))
    assert json.loads(plan.to_json())["engine"] == {"name": "vllm"}  # version null: each chip's newest tables


def test_with_engine_replaces_the_scenario_engine_and_names_a_bad_value():
    scenario = parse_scenario(micro_dict())
    assert with_engine(scenario, None) is scenario
    assert with_engine(scenario, "sglang").engine == "sglang"
    for bad in ("tensorrt", "vllm==", "VLLM"):
        with pytest.raises(InputError, match="--engine"):
            with_engine(scenario, bad)
    with pytest.raises(InputError, match="no measured tables for vllm 0.0.1"):
        with_engine(scenario, "vllm==0.0.1")


def test_simulate_refuses_a_bad_engine_with_exit_2_naming_it(tmp_path):
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps(micro_dict()))
    result = runner.invoke(app, ["simulate", str(scenario), str(PLANS / "pdd-two-dc.json"), "--engine", "tensorrt"])
    assert result.exit_code == 2, result.output
    assert "--engine" in result.output and "tensorrt" in result.output and "Traceback" not in result.output


def test_export_warns_when_the_format_is_not_the_plans_engine(tmp_path):
    plan = json.loads((PLANS / "pdd-two-dc.json").read_text())
    plan["engine"] = {"name": "vllm", "version": None}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    args = ["export", str(path), "--model", "m", "--out"]
    warned = runner.invoke(app, [*args, str(tmp_path / "a"), "--format", "sglang"])
    assert warned.exit_code == 0, warned.output
    assert "warning: the plan's numbers assume engine vllm, but --format sglang deploys sglang" in warned.output
    same = runner.invoke(app, [*args, str(tmp_path / "b"), "--format", "vllm"])
    assert same.exit_code == 0 and "warning" not in same.output


def test_export_warning_rule():
    assert engine_warning("roofline", "sglang") is None  # a roofline plan assumes no engine
    assert engine_warning("sglang==0.5.14", "dynamo") is None  # Dynamo's graph runs SGLang workers
    assert "deploys sglang" in engine_warning("trtllm", "k8s")
