"""db imports nothing of the project and reads no environment variable."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import db

DB = Path(db.__file__).parent
PROJECT = ("placer", "executor", "profiler", "placer_kernels")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_module_of_db_imports_the_project_or_reads_the_environment():
    for path in sorted(DB.rglob("*.py")):
        bad = {n for n in _imports(path) if n.split(".")[0] in PROJECT}
        assert not bad, f"{path.relative_to(DB.parent)} imports {sorted(bad)}"
        text = path.read_text()
        assert "os.environ" not in text and "getenv" not in text, f"{path.relative_to(DB.parent)} reads the environment"


def test_importing_db_loads_no_placer_module():
    code = ("import sys, db, db.repo, db.request_log, db.migrate; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('placer', 'executor', 'profiler', 'placer_kernels')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
