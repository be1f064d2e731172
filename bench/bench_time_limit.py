"""How far past ``optimize --time-limit`` the command ends, on the hardening suite's large generated scenarios.

    PYTHONPATH=. .venv/bin/python bench/bench_time_limit.py [--repeats 3] [--load 0] [--base /path/to/checkout]
        [--cases mesh-40x20,ring-10x20,ring-40x200]

Cases (:mod:`bench.limit_scenarios`): ``mesh-40x20`` — 40 datacenters in a full WAN mesh, 20 classes,
``--time-limit 4`` (its data take longer than the limit to prepare); ``ring-10x20`` — 10 datacenters in a ring, 20
classes, ``--time-limit 6`` (a plan at the limit, its figures after); ``ring-40x200`` — 200 classes,
``--time-limit 3`` (the build alone outlives it). Each run is ``optimize --no-verify`` in a fresh process (``--json``;
the mesh in the table view, as its test runs it), timed in it from the command's call (its imports before: Python's
start-up and imports are not what the limit bounds); where a plan came back, the process also times doing again what
the command does with it after the limit by design (:func:`bench.limit_scenarios.evaluation_s`: its figures, its check
and, in the table view, its "why"). ``--load N`` keeps N busy-looping processes running beside (a loaded or slower machine:
N = 6 on 2 cores runs each process at about a quarter of its speed). ``--base``: the same runs from another checkout,
alternately with this one's, on the same scenario files.

Prints per case and side the median wall seconds, the exit codes, the median overrun past the limit, and that overrun
less that work on the plan (what ran past the limit that the limit should have bounded); then each run's wall and
after-the-limit seconds (where the exits differ, medians mix runs with and without a plan).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from bench.limit_scenarios import full_mesh, large_scenario  # noqa: E402

#: case → (scenario, --time-limit, the table view: as tests/placer/hardening/test_build_deadline.py runs the mesh)
CASES = {
    "mesh-40x20": (lambda: full_mesh(40, 20), 4.0, True),
    "ring-10x20": (lambda: large_scenario(datacenters=10, classes=20), 6.0, False),
    "ring-40x200": (lambda: large_scenario(datacenters=40, classes=200), 3.0, False),
}

#: One run in a fresh process: the command imported first, then timed; what it does with a plan after the limit timed
#: again (by this checkout's :func:`bench.limit_scenarios.evaluation_s`, loaded from its file: a base checkout may not
#: have it).
DRIVER = r"""
import importlib.util, json, sys, time
from pathlib import Path
from typer.testing import CliRunner
from placer.cli import app
path, limit, helpers, table = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "table"
plan = Path(path).with_suffix(".plan.json")
runner = CliRunner()
runner.invoke(app, ["optimize", "--help"])
start = time.monotonic()
result = runner.invoke(app, ["optimize", path, "--time-limit", limit, "--no-verify", "--out", str(plan)]
                       + ([] if table else ["--json"]))
wall = time.monotonic() - start
figures = 0.0
if result.exit_code == 0:
    spec = importlib.util.spec_from_file_location("limit_scenarios", helpers)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    figures = module.evaluation_s(path, plan.read_text(), why=table)
print(json.dumps({"wall": wall, "exit": result.exit_code, "figures": figures}))
"""


def run_one(checkout: Path, python: str, path: Path, limit: float, table: bool) -> dict:
    helpers = HERE / "bench" / "limit_scenarios.py"
    out = subprocess.run([python, "-c", DRIVER, str(path), f"{limit:g}", str(helpers), "table" if table else "json"],
                         cwd=checkout, capture_output=True, text=True,
                         env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"}, check=False)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{checkout}: the run failed:\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load", type=int, default=0, help="busy-looping processes beside the runs")
    parser.add_argument("--base", type=Path, help="another checkout to run alternately with this one")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--python", default=str(HERE / ".venv" / "bin" / "python"))
    args = parser.parse_args()
    sides = {"this": HERE} | ({"base": args.base.resolve()} if args.base else {})
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{'case':<12} {'side':<5} {'limit':>6} {'wall s':>7} {'exits':<8} {'past s':>7} "
                  f"{'after s':>8} {'past - after':>13}  each run: wall (after) s")
            for case in args.cases.split(","):
                make, limit, table = CASES[case]
                path = Path(tmp) / f"{case}.yaml"
                path.write_text(yaml.safe_dump(make()))
                runs: dict[str, list[dict]] = {side: [] for side in sides}
                for _ in range(args.repeats):
                    for side, checkout in sides.items():
                        runs[side].append(run_one(checkout, args.python, path, limit, table))
                for side, rows in runs.items():
                    wall = statistics.median(r["wall"] for r in rows)
                    figures = statistics.median(r["figures"] for r in rows)
                    past = statistics.median(r["wall"] - limit for r in rows)
                    net = statistics.median(r["wall"] - limit - r["figures"] for r in rows)
                    exits = "/".join(str(r["exit"]) for r in rows)
                    each = " ".join(f"{r['wall']:.2f} ({r['figures']:.2f})" for r in rows)
                    print(f"{case:<12} {side:<5} {limit:>6g} {wall:>7.2f} {exits:<8} {past:>7.2f} {figures:>8.2f} "
                          f"{net:>13.2f}  {each}")
    finally:
        for hog in hogs:
            hog.kill()
    print(f"(medians of {args.repeats}; {args.load} busy processes beside)")


if __name__ == "__main__":
    main()
