"""Where engines run: `--backend`/`--device` → a runtime, GPU claims per instance, and `deploy --dry-run`."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from executor.devices import Runtime, place_on_devices, resolve_runtime
from executor.placement import placement
from placer.plan import Plan
from tests.executor.test_deploy_plan import PLAN, _app


@pytest.mark.parametrize(("backend", "device", "gpus", "expected"), [
    ("auto", "auto", 0, Runtime("torch", "cpu", "float32", False)),
    ("auto", "auto", 1, Runtime("triton", "cuda", "bfloat16", False)),
    ("torch", "cuda", 2, Runtime("torch", "cuda", "bfloat16", False)),
    ("triton", "cpu", 1, Runtime("triton", "cpu", "float32", True)),  # the interpreter only when asked
    ("auto", "cpu", 8, Runtime("torch", "cpu", "float32", False)),
    ("triton", "cuda", None, Runtime("triton", "cuda", "bfloat16", False)),  # a remote cluster's GPUs
])
def test_options_resolve_to_a_backend_device_and_dtype(backend, device, gpus, expected):
    assert resolve_runtime(backend, device, gpus) == expected


@pytest.mark.parametrize(("backend", "device", "gpus", "named"), [
    ("auto", "cuda", 0, "no GPU is visible"), ("triton", "cuda", 0, "no GPU is visible"),
    ("cutlass", "auto", 0, "--backend must be one of"), ("auto", "tpu", 0, "--device must be one of")])
def test_impossible_options_are_refused_naming_the_option(backend, device, gpus, named):
    with pytest.raises(ValueError, match=named):
        resolve_runtime(backend, device, gpus)


def test_instances_claim_their_tp_gpus_or_share_the_few_there_are():
    specs = placement(Plan.model_validate(PLAN))  # 2 P tp8, 1 RLD tp8, 3 MD tp4: 36 chips
    cuda = resolve_runtime("auto", "cuda", 64)
    assert [s.num_gpus for s in place_on_devices(specs, cuda, 64)] == [8, 8, 8, 4, 4, 4]
    assert {s.num_gpus for s in place_on_devices(specs, cuda, 1)} == {0.1666}  # one H200 for a whole plan
    assert {s.num_gpus for s in place_on_devices(specs, cuda, 13)} == {2.0}  # Ray takes whole GPUs above one
    assert all(s.device == "cpu" and s.num_gpus == 0 for s in place_on_devices(specs, Runtime(), 0))


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    return path


def _dry_run(plan_file, *args):
    return CliRunner().invoke(_app(), ["deploy", str(plan_file), "--dry-run", "--max-per-pool", "1", *args])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
def test_dry_run_for_triton_on_cuda_on_a_cpu_machine_says_no_gpu_is_visible(plan_file):
    result = _dry_run(plan_file, "--backend", "triton", "--device", "cuda")
    assert result.exit_code == 2, result.output
    assert "no GPU is visible" in result.output and "Traceback" not in result.output


def test_dry_run_shows_the_engines_and_each_instances_device(plan_file, monkeypatch):
    import executor.cli

    monkeypatch.setattr(executor.cli, "visible_gpus", lambda: 0)
    out = _dry_run(plan_file).output
    assert "engines: backend torch on cpu, float32" in out
    assert "rld-dc-a-H800-SXM-tp8-0" in out and " cpu " in out
    monkeypatch.setattr(executor.cli, "visible_gpus", lambda: 1)  # as on a machine with one GPU
    result = _dry_run(plan_file)
    assert result.exit_code == 0, result.output
    assert "engines: backend triton on cuda, bfloat16" in result.output
    assert " cuda   0.3333 " in result.output  # three instances share the one GPU


def test_dry_run_checks_the_model_directory(plan_file, tmp_path, hf_checkpoint_dir):
    out = _dry_run(plan_file, "--model-dir", str(hf_checkpoint_dir)).output
    assert "(qwen3: 2 layers, hidden 64, 4/2 q/kv heads of 32, vocab 160" in out
    missing = _dry_run(plan_file, "--model-dir", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "nowhere" in missing.output and "not a directory" in missing.output
    both = _dry_run(plan_file, "--model-dir", str(hf_checkpoint_dir), "--model-file", str(plan_file))
    assert both.exit_code == 2 and "not both" in both.output


@pytest.fixture
def hf_checkpoint_dir(tmp_path_factory):
    from tests.executor.engine.hf_support import tiny_checkpoints

    return tiny_checkpoints(tmp_path_factory)["qwen3"]


def test_dry_run_against_a_cluster_leaves_the_device_to_the_cluster(plan_file):
    result = _dry_run(plan_file, "--address", "auto")
    assert result.exit_code == 0, result.output
    assert "device decided on the cluster" in result.output
    explicit = _dry_run(plan_file, "--address", "auto", "--device", "cuda")  # the cluster's GPUs, not this machine's
    assert explicit.exit_code == 0 and "backend triton on cuda, bfloat16" in explicit.output
