"""`placer export` of a fleet plan (examples/fleet-two-models.yaml): a folder per model, names that never meet."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli.app import app
from tests.placer.export.conftest import PLANS, ROOT

runner = CliRunner()
PLAN = str(PLANS / "fleet-two-models.json")  # placer optimize examples/fleet-two-models.yaml --json (frozen)
SCENARIO = str(ROOT / "examples" / "fleet-two-models.yaml")


def _export(tmp_path, fmt, *extra):
    result = runner.invoke(app, ["export", PLAN, "--format", fmt, *extra, "--out", str(tmp_path / fmt)])
    assert result.exit_code == 0, result.output
    return tmp_path / fmt


@pytest.mark.parametrize("fmt", ["sglang", "vllm", "dynamo", "k8s"])
def test_each_model_gets_its_own_folder_with_its_catalog_checkpoint(tmp_path, fmt):
    out = _export(tmp_path, fmt, "--scenario", SCENARIO)
    assert {p.name for p in out.iterdir() if p.is_dir()} == {"chat", "code"}
    readme = (out / "README.md").read_text()
    assert "meta-llama/Llama-3.1-8B-Instruct" in readme and "Qwen/Qwen3-32B" in readme
    assert "Llama-3.1-8B-Instruct" in (out / "chat" / "README.md").read_text()
    assert "Qwen3-32B" not in "".join(p.read_text() for p in (out / "chat").rglob("*") if p.is_file())


def test_scripts_name_each_model_hosts_apart_and_route_within_the_model(tmp_path):
    out = _export(tmp_path, "sglang", "--scenario", SCENARIO)
    commands = {m: json.loads((out / m / "commands.json").read_text()) for m in ("chat", "code")}
    hosts = {m: {c["host"] for c in cmds} for m, cmds in commands.items()}
    assert hosts["chat"] and hosts["code"] and not hosts["chat"] & hosts["code"]
    assert all(h.startswith("chat-") for h in hosts["chat"])
    for router in (out / "chat").rglob("router-*.sh"):
        assert "code-" not in router.read_text()


def test_k8s_puts_each_model_in_its_namespace(tmp_path):
    out = _export(tmp_path, "k8s", "--scenario", SCENARIO)
    for model in ("chat", "code"):
        for manifest in (out / model).rglob("*.yaml"):
            assert {d["metadata"]["namespace"] for d in yaml.safe_load_all(manifest.read_text())} == {
                f"placer-{model}"}


def test_without_a_scenario_each_model_needs_its_checkpoint(tmp_path):
    missing = runner.invoke(app, ["export", PLAN, "--format", "vllm", "--out", str(tmp_path / "a")])
    assert missing.exit_code == 2 and "--model chat=ID" in missing.output
    bare = runner.invoke(app, ["export", PLAN, "--format", "vllm", "--model", "x/y", "--out", str(tmp_path / "b")])
    assert bare.exit_code == 2 and "NAME=VALUE" in bare.output
    out = _export(tmp_path, "vllm", "--model", "chat=org/chat-ckpt", "--model", "code=org/code-ckpt")
    assert "org/code-ckpt" in (out / "code" / "commands.json").read_text()
