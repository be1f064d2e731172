"""`placer export` as a user runs it: files written, exit 2 naming the option for bad input."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from placer.cli.app import app
from tests.placer.export.conftest import PLANS, ROOT

runner = CliRunner()
PLAN = str(PLANS / "pdd-two-dc.json")
SCENARIO = str(ROOT / "examples" / "pdd-two-dc.yaml")


def test_export_writes_the_scripts_and_a_readme_pricing_the_fallbacks(tmp_path):
    result = runner.invoke(app, ["export", PLAN, "--format", "sglang", "--scenario", SCENARIO,
                                 "--model", "deepseek-ai/DeepSeek-V3.2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    readme = (tmp_path / "README.md").read_text()
    assert "first token now waits" in readme and "RLD pools not deployed" in readme
    commands = json.loads((tmp_path / "commands.json").read_text())
    assert {c["datacenter"] for c in commands} == {"dc-a", "dc-b"}
    assert (tmp_path / "dc-a" / "router-dc-a-to-dc-b.sh").stat().st_mode & 0o111


def test_model_dir_must_exist_and_is_passed_as_an_absolute_path(tmp_path):
    bad = runner.invoke(app, ["export", PLAN, "--format", "vllm", "--model-dir", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "--model-dir" in bad.output
    (tmp_path / "ckpt").mkdir()
    ok = runner.invoke(app, ["export", PLAN, "--format", "vllm", "--model-dir", str(tmp_path / "ckpt"),
                             "--out", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    assert str(tmp_path / "ckpt") in (tmp_path / "out" / "commands.json").read_text()


def test_bad_input_exits_2_naming_what_is_wrong(tmp_path):
    cases = [
        (["--format", "trt"], "--format"),
        (["--format", "k8s"], "--model"),
        (["--format", "k8s", "--model", "m", "--scenario", str(ROOT / "examples" / "eight-dc.yaml")], "--scenario"),
        (["--format", "k8s", "--model", "m", "--chips-per-node", "12"], "--chips-per-node"),
    ]
    for extra, named in cases:
        result = runner.invoke(app, ["export", PLAN, *extra, "--out", str(tmp_path)])
        assert result.exit_code == 2 and named in result.output, (extra, result.output)
        assert "Traceback" not in result.output
    bad_plan = tmp_path / "bad.json"
    bad_plan.write_text(json.dumps({"scenario": "x", "pools": [{"role": "P", "datacenter": "a", "chip": "H20",
                                                                 "tp": 0, "count": 1}]}))
    result = runner.invoke(app, ["export", str(bad_plan), "--format", "vllm", "--model", "m"])
    assert result.exit_code == 2 and "pools.0.tp" in result.output


def test_without_model_the_engines_load_the_catalog_hugging_face_id(tmp_path):
    """`--scenario` alone: the scripts load the checkpoint engines can fetch, not the catalog's own name
    (pdd-two-dc plans deepseek-v3.2); `--model` still overrides it."""
    result = runner.invoke(app, ["export", PLAN, "--format", "vllm", "--scenario", SCENARIO, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    servers = [c for c in json.loads((tmp_path / "commands.json").read_text()) if c["program"] == ["vllm", "serve"]]
    assert servers and all(c["args"][0] == "deepseek-ai/DeepSeek-V3.2" for c in servers)
    assert all(c["args"][1:3] == ["--served-model-name", "deepseek-v3.2"] for c in servers)
    other = runner.invoke(app, ["export", PLAN, "--format", "vllm", "--scenario", SCENARIO, "--model", "my/ckpt",
                                "--out", str(tmp_path / "o")])
    assert other.exit_code == 0 and "my/ckpt" in (tmp_path / "o" / "commands.json").read_text()
