"""`--profiles latest`: the profiles `placer profile chip` keeps are found; none kept is exit 2, not the roofline."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from placer.cli.app import app
from placer.profiles.records import ChipProfile
from placer.profiles.store import keep
from tests.profiler.conftest import synthetic_profile

ESTIMATE = ["estimate", "--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--profiles", "latest", "--json"]


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("PLACER_DATABASE_URL", f"sqlite:///{tmp_path / 'placer.db'}")
    return tmp_path / "data" / "placer" / "profiles"


def test_latest_with_nothing_stored_exits_2_naming_the_chip_the_folder_and_the_command(data_dir):
    result = CliRunner().invoke(app, ESTIMATE)
    assert result.exit_code == 2, result.output
    assert "no stored profile for H100-SXM" in result.output and str(data_dir) in result.output
    assert "placer profile chip" in result.output and "Traceback" not in result.output


def test_latest_reads_the_profile_kept_under_the_user_data_dir(data_dir):
    roofline = json.loads(CliRunner().invoke(app, ESTIMATE[:-3] + ["--json"]).stdout)
    path = keep(ChipProfile.model_validate(synthetic_profile("H100-SXM", 0.4, 0.5)))
    assert path.parent == data_dir
    result = CliRunner().invoke(app, ESTIMATE)
    assert result.exit_code == 0, result.output
    measured = json.loads(result.stdout)
    assert measured["prefill_s"] > roofline["prefill_s"]  # 0.4 of peak instead of the default 0.65
