"""Golden files: the export of each bundled example's frozen plan in each format, file by file.

A change to what `placer export` writes shows up here as a diff. To accept it, regenerate:
``PLACER_UPDATE_GOLDEN=1 pytest tests/placer/export/test_golden.py`` and review the diff of
tests/placer/export/golden/ before committing it."""

from __future__ import annotations

import os

import pytest

from tests.placer.export.conftest import EXAMPLES, GOLDEN, SHAPE_CASES, example_export

FORMATS = ("sglang", "vllm", "dynamo", "k8s")
UPDATE = os.environ.get("PLACER_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("example", (*EXAMPLES, *SHAPE_CASES))
def test_export_matches_golden(example, fmt):
    files = example_export(example, fmt)
    folder = GOLDEN / example / fmt
    if UPDATE:
        for old in sorted(folder.rglob("*"), reverse=True):
            old.unlink() if old.is_file() else old.rmdir()
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert on_disk == set(files), "files differ from the golden set (PLACER_UPDATE_GOLDEN=1 to regenerate)"
    for rel, text in files.items():
        assert (folder / rel).read_text() == text, f"{example}/{fmt}/{rel} differs from its golden file"
