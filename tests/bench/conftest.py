"""Fixtures for the benchmark scripts' tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench_path():
    """``bench/`` on ``sys.path`` for the module, as when a script there runs: its siblings import each other
    by their bare names (``import agreement_pools``)."""
    sys.path.insert(0, str(BENCH))
    yield BENCH
    sys.path.remove(str(BENCH))
