"""The walk of a `Problem` through one solve: how often the reader of the code changes files.

Usage: PYTHONPATH=. .venv/bin/python tools/walk_problem.py [SCENARIO]   (default examples/pdd-two-dc.yaml)

It solves the scenario once with `optimize.solve_architecture` under a profiler and lists the
*stops*: the project's functions that receive the problem object (or a route, pool or class that
holds it) as an argument, each counted once, in the order they are first called — the path a
reader follows to learn what the solve does with the problem. It prints

* stops: how many such functions there are;
* file changes: consecutive stops in different files;
* returns: file changes that go back to a file the walk had already left;
* entries per file: how often the walk enters each file.

Fewer stops and returns mean a problem's physics is read in fewer places. The figures are
structural (they do not depend on the machine's speed).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path



def _holds(value: object, problem: object) -> bool:
    if value is problem:
        return True
    for name in ("problem", "_problem"):
        if getattr(value, name, None) is problem:
            return True
    return False


def walk(scenario: str) -> list[tuple[str, str]]:
    """(file, function) stops of one solve of ``scenario``, in first-call order."""
    from placer.ilp.formulation import pdd_architecture
    from placer.optimize import SolveConfig, as_problem, solve_architecture
    from placer.specs import load_scenario

    root = Path(sys.modules["placer"].__file__).resolve().parents[1]
    problem = as_problem(load_scenario(scenario))
    seen: dict[tuple[str, str], None] = {}

    def profile(frame, event, arg):  # noqa: ARG001 - sys.setprofile's signature
        if event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(str(root / "placer")):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(_holds(frame.f_locals.get(n), problem) for n in names):
            key = (str(Path(path).relative_to(root)), code.co_qualname)
            seen.setdefault(key, None)

    sys.setprofile(profile)
    try:
        solve_architecture(problem, pdd_architecture(problem), SolveConfig())
    finally:
        sys.setprofile(None)
    return list(seen)


def main() -> None:
    scenario = sys.argv[1] if len(sys.argv) > 1 else "examples/pdd-two-dc.yaml"
    stops = walk(scenario)
    entries: Counter[str] = Counter()
    left: set[str] = set()
    changes = returns = 0
    previous = None
    for path, _ in stops:
        if path != previous:
            entries[path] += 1
            if previous is not None:
                changes += 1
                left.add(previous)
                if path in left:
                    returns += 1
        previous = path
    print(f"stops: {len(stops)}  file changes: {changes}  returns to a file already left: {returns}")
    for path, n in entries.most_common():
        print(f"  {n:4d}  {path}")


if __name__ == "__main__":
    main()
