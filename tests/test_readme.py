"""Every command the README shows, run as written and as a user runs it: each in a fresh folder
(not the repository) holding the repository's examples/, docs/ and bench/ and a ``.venv/bin`` whose
``placer`` and ``python`` are this virtualenv's, with no PYTHONPATH — so only what ``make setup``
installs is importable (a benchmark importing the test suite fails here as it does for a user).

A command must exit 0; a server (``placer serve``, ``placer deploy`` without ``--dry-run``)
must still be running after it started and is then stopped. Commands that read a file an
earlier command writes (``plan.json``) get it from that earlier command, run first. An
``export NAME=VALUE`` line runs as written (a shell of its own).

Not run here, and why (each is a skipped case with that reason):
``make setup`` / ``make test`` install a virtualenv and run the whole suite (CI runs them,
.ci/run); the replanning chain — ``workload fit`` and ``jobs add`` of the request log a serving
``deploy`` writes, ``jobs run-now`` — needs that deployment and its traffic:
tests/test_readme_replanning.py runs those lines as written against one; ``deploy --apply
plan2.json`` changes a running deployment to a plan no README line writes (the closed loop on
local Ray: tests/executor/test_apply_ray.py). ``bench/bench_planner.py`` solves the
sixteen-datacenter example for minutes: it runs under ``-m slow``; a serving ``placer deploy``
starts Ray (marked ``ray``; the default run includes it).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_HERE = {"make setup": "installs a virtualenv and the packages (CI runs it: .ci/run)",
            "make test": "runs the whole suite, which includes this test (CI runs it: .ci/run)"}
SLOW = ("bench/bench_planner.py",)
CHAIN_TEST = "tests/test_readme_replanning.py runs it as written against a deployment and its traffic"
LIVE = {r"placer jobs run-now\b": f"replans from a deployment's served requests (needs one, and its traffic); "
                                   f"{CHAIN_TEST}",
        r"placer deploy --apply\b": "changes a running deployment to a plan no README line writes; "
                                    "tests/executor/test_apply_ray.py runs the closed loop",
        r"placer bench http": f"measures a running deployment (needs one); {CHAIN_TEST}"}
SERVER_START_S = 25.0


def readme_commands() -> list[str]:
    """The command lines of the README's ``bash`` blocks, continuation lines joined."""
    text = (ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line.strip())
    return lines


COMMANDS = readme_commands()


def _is_server(line: str) -> bool:
    return bool(re.search(r"placer serve\b", line)) or (bool(re.search(r"placer deploy\b", line))
                                                        and not re.search(r"--dry-run|--apply", line))


def _params():
    out = []
    for i, line in enumerate(COMMANDS):
        marks = []
        for prefix, why in NOT_HERE.items():
            if line.startswith(prefix):
                marks.append(pytest.mark.skip(reason=f"not run here: {why}"))
        for pattern, why in LIVE.items():
            if re.search(pattern, line):
                marks.append(pytest.mark.skip(reason=f"not run here: {why}"))
        served = _served_files(line)
        if served:
            marks.append(pytest.mark.skip(reason=f"not run here: reads {', '.join(served)}, which a serving "
                                                 f"deployment writes; {CHAIN_TEST}"))
        if any(s in line for s in SLOW):
            marks.append(pytest.mark.slow)
        if _is_server(line) and "placer deploy" in line:
            marks.append(pytest.mark.ray)
        out.append(pytest.param(i, line, id=f"{i:02d}-{line.split('#')[0].strip()[:60]}", marks=marks))
    return out


def _workdir(tmp: Path) -> Path:
    """A folder like the repository root after ``make setup``, elsewhere: the data folders and a
    .venv/bin running this virtualenv's interpreter and ``placer`` (its console script when installed)."""
    for name in ("examples", "docs", "bench"):
        (tmp / name).symlink_to(ROOT / name)
    bin_dir = tmp / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = Path(sys.executable).parent / "placer"
    placer = f'"{script}"' if script.is_file() else f'"{sys.executable}" -m placer.cli'
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "placer").write_text(f'#!/bin/sh\nexec {placer} "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    return tmp


def _env(tmp: Path) -> dict:
    """The user's environment: no PYTHONPATH (the installed packages only), the service database in ``tmp``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PLACER_EXECUTOR_TOKEN")}
    return {**env, "PLACER_DATABASE_URL": f"sqlite:///{tmp / 'placer.sqlite'}", "COLUMNS": "100"}


def _served_files(line: str) -> list[str]:
    """Files this (not serving) line reads that only an earlier serving command writes (``--request-log F``)."""
    earlier = COMMANDS[:COMMANDS.index(line)]
    return [f for f in re.findall(r"\b[\w.-]+\.jsonl\b", line)
            if not _is_server(line) and any(f"--request-log {f}" in c and _is_server(c) for c in earlier)]


def _needs(line: str) -> list[str]:
    """Earlier README commands whose output (a file this line names) it reads."""
    wanted = [w for w in re.findall(r"\b[\w.-]+\.json\b", line) if not (ROOT / w).exists()]
    return [c for c in COMMANDS[:COMMANDS.index(line)] if any(f"--out {w}" in c for w in wanted)]


def _run(line: str, cwd: Path, env: dict, timeout_s: float = 280) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)


def _serve(line: str, cwd: Path, env: dict) -> None:
    """Start a server line; it must be running (not exited) after SERVER_START_S, then is stopped."""
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"{line!r} exited with {proc.returncode} instead of serving:\n{err[-2000:]}{out[-500:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.parametrize(("index", "line"), _params())
def test_readme_command_works_as_written(index, line, tmp_path):
    cwd = _workdir(tmp_path)
    env = _env(tmp_path)
    for earlier in _needs(line):
        r = _run(earlier, cwd, env)
        assert r.returncode == 0, f"{earlier!r} (needed by {line!r}) exited {r.returncode}:\n{r.stderr[-2000:]}"
    if _is_server(line):
        _serve(line, cwd, env)
        return
    r = _run(line, cwd, env)
    assert r.returncode == 0, f"{line!r} exited {r.returncode}:\n{r.stderr[-2000:]}"
    assert "Traceback" not in r.stderr


def test_the_readme_shows_commands():
    assert any("placer optimize" in c for c in COMMANDS) and any("placer compare" in c for c in COMMANDS)
