"""Fixtures: the sample of the kernel database kept in the repository, imported into a temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.kernels.importer import import_tables

SAMPLE_DB = Path(__file__).resolve().parents[2] / "data" / "kernels"


@pytest.fixture(scope="module")
def sample_tables(tmp_path_factory) -> Path:
    """The sample imported for H200 and L40S (TensorRT-LLM); returns the tables directory."""
    out = tmp_path_factory.mktemp("kernel-tables")
    for system in ("h200_sxm", "l40s"):
        import_tables(SAMPLE_DB, system, "trtllm", out=out, today="2026-12-05")
    return out
