"""Hostile checkpoint directories (issue 43): `placer deploy --dry-run --model-dir` and
`load_checkpoint` refuse them with a named error (exit 2) before anything of the claimed size
is built, and never read a shard outside the model directory."""

from __future__ import annotations

import os
import time

import pytest
from typer.testing import CliRunner

from executor.engine.hf import CheckpointError, describe_model_dir, load_checkpoint, shard_files
from placer.cli import app
from placer.errors import InputError
from tests.placer.hardening.reader_attacks import SHARD, _config, _index, checkpoint_attacks, checkpoint_files
from tests.placer.hardening.reader_battery import micro_plan_json, prepare

ATTACKS = checkpoint_attacks()


@pytest.fixture(scope="module")
def plan_json() -> str:
    return micro_plan_json()


def _write(folder, files: dict[str, bytes]):
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return folder / "m"


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_deploy_dry_run_refuses_a_hostile_checkpoint_naming_the_file(tmp_path, plan_json, attack):
    result = CliRunner().invoke(app, prepare(tmp_path, attack, plan_json))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code == attack.exit_code, result.output
    message = " ".join(result.output.split())
    for name in attack.names:
        assert name in message, f"{name!r} not in {message!r}"


@pytest.mark.parametrize("changes", [{"num_hidden_layers": 1_000_000}, {"vocab_size": 10**12},
                                     {"hidden_size": 65536, "intermediate_size": 2**20, "num_hidden_layers": 1024}])
def test_huge_dimensions_are_refused_before_anything_is_built(tmp_path, changes):
    """1e6 layers took 4.5 GB and 40 s before failing; now refused from config.json at once."""
    model_dir = _write(tmp_path, checkpoint_files(**{"config.json": _config(**changes)}))
    start = time.monotonic()
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(model_dir)
    assert time.monotonic() - start < 5
    assert isinstance(err.value, InputError)
    assert any(key in str(err.value) for key in (*changes, "parameters"))


def test_an_outside_shard_gets_the_same_answer_whether_it_exists_or_not(tmp_path):
    """The index is decided on the names alone: nothing outside is opened or even looked up."""
    secret = tmp_path / "secret.safetensors"
    secret.write_bytes(b"not for you")
    messages = []
    for i, name in enumerate((str(secret), str(tmp_path / "absent.safetensors"), "../secret.safetensors",
                              "../absent.safetensors")):
        model_dir = _write(tmp_path / f"c{i}", checkpoint_files(**{"model.safetensors.index.json": _index(name)}))
        with pytest.raises(CheckpointError, match="outside the model directory") as err:
            shard_files(model_dir)
        messages.append(str(err.value).replace(name, "NAME").replace(f"c{i}", "C"))
    assert len(set(messages)) == 1, messages


def test_shards_inside_the_directory_still_load_and_links_inside_are_followed(tmp_path):
    """A sub-folder shard and a symbolic link the operator placed (the Hugging Face cache's
    snapshots are links into ../../blobs) are read as before."""
    model_dir = _write(tmp_path, checkpoint_files(**{"model.safetensors.index.json": _index("sub/../" + SHARD)}))
    assert [p.name for p in shard_files(model_dir)] == [SHARD]
    blob = tmp_path / "blobs" / "abc"
    blob.parent.mkdir()
    os.replace(model_dir / SHARD, blob)
    os.symlink(blob, model_dir / SHARD)
    assert shard_files(model_dir) == [model_dir / SHARD]
    assert "1 shard(s)" in describe_model_dir(model_dir)
