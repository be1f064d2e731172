"""A two-model fleet built from examples/fleet-two-models.yaml, varied per test."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.placer.conftest import EXAMPLES


@pytest.fixture
def fleet_data() -> dict:
    """The example fleet as a mapping (a fresh copy per test)."""
    return copy.deepcopy(yaml.safe_load((EXAMPLES / "fleet-two-models.yaml").read_text()))
