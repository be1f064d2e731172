"""Counts of the reader battery of issue 43: each attack through the real ``placer`` command.

Run ``python -m tests.placer.hardening.reader_battery [NAME_SUBSTRING ...]``: every attack of
:mod:`tests.placer.hardening.reader_attacks` runs in its own process (address space capped at
``--memory-gib``, wall clock at ``--timeout``) and the table gives its exit code, whether a
traceback showed, whether it ran out of time, and its peak RSS; the last lines are the counts
for the issue's note. Not a test module (the tests are test_reader_attacks.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.placer.hardening.reader_attacks import (
    PROFILE_ATTACKS,
    REPO,
    TRACE_ATTACKS,
    ReaderAttack,
    checkpoint_attacks,
)

PYTHON = str(REPO / ".venv" / "bin" / "python")


def prepare(folder: Path, attack: ReaderAttack, plan_json: str) -> list[str]:
    """Write the attack's files (plus micro.yaml and plan.json) under ``folder``; its command line."""
    from tests.placer.conftest import micro_dict

    (folder / "micro.yaml").write_text(yaml.safe_dump(micro_dict()))
    (folder / "plan.json").write_text(plan_json)
    for name, content in attack.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return [part.replace("{dir}", str(folder)) for part in attack.command]


def micro_plan_json() -> str:
    from placer.optimize import SolveConfig, optimize
    from placer.specs import parse_scenario
    from tests.placer.conftest import micro_dict

    return optimize(parse_scenario(micro_dict()), SolveConfig(marginals=False)).to_json()


#: Runs ``placer`` in a grandchild capped at the given address space and reports its peak RSS on
#: stderr's last line. The launcher is a fresh interpreter, so the grandchild forks from a small
#: process: a child forked straight from a test run that has grown to ~1 GB would count that run's
#: pages in its own ``ru_maxrss`` before it execs (the kernel keeps the pre-exec high-water mark).
_LAUNCHER = """
import os, resource, subprocess, sys
limit = int(sys.argv[1])
cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proc = subprocess.Popen([sys.executable, "-m", "placer.cli", *sys.argv[2:]], preexec_fn=cap)
_, status, usage = os.wait4(proc.pid, 0)
sys.stderr.write(f"\\nrss_kib={usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_one(attack: ReaderAttack, plan_json: str, memory_gib: float, timeout: float, root: Path = REPO) -> dict:
    """Run one attack in a child process (``placer`` of the code at ``root``); its outcome, time and
    peak RSS (MiB)."""
    limit = int(memory_gib * 2**30)
    with tempfile.TemporaryDirectory() as tmp:
        args = prepare(Path(tmp), attack, plan_json)
        start = time.monotonic()
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen([PYTHON, "-c", _LAUNCHER, str(limit), *args], stdout=out,
                                    stderr=subprocess.STDOUT, cwd=root, start_new_session=True,
                                    env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(root)})
            try:
                proc.wait(timeout=timeout)
                hung = False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)  # the launcher and the placer under it
                proc.wait()
                hung = True
            out.seek(0)
            text = out.read().decode(errors="replace")
    rc = proc.returncode
    found = re.findall(r"rss_kib=(\d+)", text)
    text = re.sub(r"\s*rss_kib=\d+\s*$", "", text)
    message = " ".join(text.split())
    named = all(n in message for n in attack.names)
    return {"name": attack.name, "rc": rc, "traceback": "Traceback" in text,
            "hung": hung, "seconds": time.monotonic() - start,
            "rss_mib": int(found[-1]) / 1024 if found else float("nan"),
            "ok": rc == attack.exit_code and named and "Traceback" not in text and not hung,
            "tail": message[-160:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="run the attacks whose name contains one of these")
    parser.add_argument("--memory-gib", type=float, default=6.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--root", type=Path, default=REPO, help="the code to attack (e.g. a worktree of "
                        "the commit before the fix)")
    args = parser.parse_args()
    attacks = [*PROFILE_ATTACKS, *TRACE_ATTACKS, *checkpoint_attacks()]
    attacks = [a for a in attacks if not args.only or any(s in a.name for s in args.only)]
    plan_json = micro_plan_json()
    rows = []
    for attack in attacks:
        row = run_one(attack, plan_json, args.memory_gib, args.timeout, args.root)
        rows.append(row)
        print(f"{row['name']:42s} rc={row['rc']:>3} tb={int(row['traceback'])} hung={int(row['hung'])} "
              f"{row['seconds']:6.1f}s {row['rss_mib']:8.0f}MiB {'ok ' if row['ok'] else 'BAD'} {row['tail'][-110:]}",
              flush=True)
    print(f"inputs tried {len(rows)}; as specified {sum(r['ok'] for r in rows)}; "
          f"tracebacks {sum(r['traceback'] for r in rows)}; "
          f"hangs {sum(r['hung'] for r in rows)}; exit 0 where an error was due "
          f"{sum(r['rc'] == 0 for r, a in zip(rows, attacks) if a.exit_code)}; "
          f"peak RSS max {max(r['rss_mib'] for r in rows):.0f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
