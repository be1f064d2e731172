"""`--engine` on optimize, evaluate and compare: the scenario's engine replaced before solving."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.placer.conftest import micro_dict


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_the_engine_option_reaches_the_plan_of_every_planning_face(tmp_path):
    scenario, plan_file = tmp_path / "s.yaml", tmp_path / "plan.json"
    scenario.write_text(yaml.safe_dump(micro_dict()))
    opt = invoke("optimize", scenario, "--engine", "vllm", "--no-verify", "--no-marginals", "--json", "--out", plan_file)
    assert opt.exit_code == 0, opt.output
    assert json.loads(plan_file.read_text())["engine"] == {"name": "vllm"}
    ev = invoke("evaluate", scenario, plan_file, "--engine", "vllm", "--json")
    assert ev.exit_code == 0, ev.output
    assert json.loads(ev.stdout)["engine"] == {"name": "vllm"}
    cmp = invoke("compare", scenario, "--engine", "vllm", "--no-break-even", "--json")
    assert cmp.exit_code == 0, cmp.output
    assert json.loads(cmp.stdout)["pdd"]["engine"] == {"name": "vllm"}


def test_an_unknown_engine_is_bad_input_naming_the_option(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(micro_dict()))
    for command in ("optimize", "evaluate", "compare"):
        args = [command, scenario] + ([tmp_path / "none.json"] if command == "evaluate" else [])
        r = invoke(*args, "--engine", "bogus")
        assert r.exit_code == 2, (command, r.output)
        assert "--engine" in r.stderr and "bogus" in r.stderr
