"""Fixtures for workload tests."""

import pytest


@pytest.fixture
def seed() -> int:
    return 11
