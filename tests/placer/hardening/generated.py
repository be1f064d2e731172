"""Large generated scenarios for the time-budget tests (not a test module): the generators are
bench/limit_scenarios.py's (bench/bench_time_limit.py runs them too), and the time a plan's figures take."""

from __future__ import annotations

import time
from pathlib import Path

from bench.limit_scenarios import full_mesh, large_scenario  # noqa: F401 - the tests take them here


def evaluation_s(scenario: Path, plan_json: str) -> float:
    """Seconds this machine takes, now, to work out a solved plan's figures again
    (:func:`placer.optimize.with_metrics`: its queue laws, TTFT quantiles and tail notes) — the step
    that runs after the solve by design (``--time-limit`` bounds reading the scenario and solving).
    Timed in the test, because it grows with the plan and with the machine's speed and load: ~2 s
    for a 10-datacenter plan here, ~5 s on a CI machine 2.5× slower."""
    from placer.optimize import as_problem, with_metrics
    from placer.plan import Plan
    from placer.specs import load_scenario

    problem, plan = as_problem(load_scenario(scenario)), Plan.model_validate_json(plan_json)
    start = time.monotonic()
    with_metrics(problem, plan)
    return time.monotonic() - start
