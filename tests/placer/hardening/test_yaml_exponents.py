"""Issue 43 (low): `arrival_rps: 1e-3` in a scenario YAML is a number (YAML 1.2 reads it so; PyYAML,
YAML 1.1, leaves a float without a dot or a signed exponent a string), while a quoted plain number
and the non-finite forms stay refused (placer/fields.py)."""

from __future__ import annotations

import pytest
import yaml

from placer.errors import InputError
from placer.specs import load_scenario
from tests.placer.conftest import micro_dict


def _scenario(tmp_path, rps_text: str):
    text = yaml.safe_dump(micro_dict()).replace("arrival_rps: 6.0", f"arrival_rps: {rps_text}")
    assert f"arrival_rps: {rps_text}" in text
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_scenario(path)


@pytest.mark.parametrize("text, value", [("1e-3", 1e-3), ("2E+1", 20.0), ("1.5e1", 15.0), ("1.0e-3", 1e-3)])
def test_exponent_forms_are_numbers(tmp_path, text, value):
    assert _scenario(tmp_path, text).workload.arrival_rps == value


@pytest.mark.parametrize("text", ['"6"', "1e999", "1e", "e3", "six"])
def test_other_strings_and_non_finite_numbers_stay_refused(tmp_path, text):
    with pytest.raises(InputError, match="workload.arrival_rps"):
        _scenario(tmp_path, text)
