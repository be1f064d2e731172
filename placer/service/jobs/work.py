"""What a service job computes, as functions a child process runs (:mod:`placer.service.jobs.child`),
and the deadline each gets.

in:  plain data (scenario mappings, configs, plans, measured profiles); never a database session
out: plans and simulation results, returned to the parent, which stores them

Deadlines (the child is killed past them; the job fails naming the deadline and how it was set):

- a solve (``POST /plans``): its time limit + :data:`JOB_MARGIN_S`. The limit bounds the whole
  solve (data preparation, Dinkelbach, the marginal re-solves); the margin covers what may run past
  it: a solver noticing its limit between iterations (seen up to ~2 s on a loaded 2-core host),
  the plan's extraction and checks (~0.5 s), the child's start and the answer's return;
- a replanning run: two solves, the re-solve and the current plan's re-evaluation, each with the
  job's limit: 2 × the limit + the margin (inside the job lock's 2 × limit + 120 s);
- ``POST /compare``: each with the limit, the PDD solve and, when a baseline is shown at partial
  load, PDD's best BCR within the inventory (:data:`placer.baselines.PDD_SOLVES`); per baseline
  (:data:`placer.baselines.SOLVES_PER_BASELINE`) up to four attempts of ``solve_baseline`` (with the
  SLA at the whole load, at partial load, without the SLA row, without it at partial load: each
  tried only when the one before has no plan), then, for a baseline that carries less than the
  load, the most it carries within the SLA and its re-solve at equal load with scaled inventories:
  (2 + 6 × baselines) × the limit + the margin;
- ``POST /simulate``: :data:`SIMULATE_DEADLINE_S` (no limit in the request; the simulator replays
  at most 50,000 requests, which takes seconds on the example plans).

``Settings.job_margin_s`` and ``Settings.simulate_deadline_s`` override the two constants.
"""

from __future__ import annotations

from typing import Any, Callable

from placer.errors import InfeasiblePlanError
from placer.optimize import SolveConfig, as_problem, evaluate_plan, optimize
from placer.plan import Plan
from placer.specs import parse_scenario

#: Seconds a solve may run past its time limit before its child is killed (see the module docstring).
JOB_MARGIN_S = 15.0
#: Seconds a simulation may run before its child is killed.
SIMULATE_DEADLINE_S = 120.0


def solve_deadline(time_limit_s: float, margin_s: float = JOB_MARGIN_S) -> tuple[float, str]:
    """A solve's deadline and how it was set."""
    return time_limit_s + margin_s, f"its time limit {time_limit_s:g} s + {margin_s:g} s"


def replan_deadline(time_limit_s: float, margin_s: float = JOB_MARGIN_S) -> tuple[float, str]:
    """A replanning run's deadline (a re-solve and a re-evaluation) and how it was set."""
    return 2 * time_limit_s + margin_s, f"2 × its time limit {time_limit_s:g} s + {margin_s:g} s"


def compare_deadline(time_limit_s: float, margin_s: float = JOB_MARGIN_S) -> tuple[float, str]:
    """A comparison's deadline (the most solves :func:`placer.baselines.compare` runs, each bounded by the
    time limit: see the module docstring) and how it was set."""
    from placer.baselines import BASELINES, PDD_SOLVES, SOLVES_PER_BASELINE

    solves = PDD_SOLVES + SOLVES_PER_BASELINE * len(BASELINES)
    return solves * time_limit_s + margin_s, f"{solves} solves × the time limit {time_limit_s:g} s + {margin_s:g} s"


def solve_plan(spec: dict, config: SolveConfig, measured: dict | None) -> Plan:
    """The plan of a solve job (``placer.optimize.optimize``, what ``placer optimize`` runs)."""
    return optimize(parse_scenario(spec), config, measured=measured or None)


def replan(spec: dict, config: SolveConfig, measured: dict | None, current: Plan | None) -> tuple[Plan, Plan | None]:
    """A replanning run's candidate (warm-started from ``current``) and its baseline: ``current``
    re-evaluated under the new workload (pools fixed), None when it cannot carry it or there is none."""
    scenario = parse_scenario(spec)
    candidate = optimize(scenario, config, measured=measured or None, warm_start=current)
    if current is None:
        return candidate, None
    stripped = current.model_copy(update={"routes": [], "assignments": []})
    try:
        # the current plan was made for this job's scenario, perhaps under another name or workload
        return candidate, evaluate_plan(scenario, stripped, config, measured=measured or None, other_scenario=True)
    except InfeasiblePlanError:
        return candidate, None


def compare(spec: dict, config: SolveConfig, measured: dict | None) -> dict:
    """``placer.baselines.compare``: the PDD plan beside each baseline's."""
    from placer.baselines import compare as run

    return run(as_problem(parse_scenario(spec), measured or None), config)


def simulate(spec: dict, measured: dict | None, plan: Plan, config: Any) -> dict:
    """The simulator's result data (``placer.sim.simulate``) for ``plan`` on the scenario."""
    from placer.sim import simulate as run

    return run(as_problem(parse_scenario(spec), measured or None), plan, config).data


def call(children, fn: Callable[..., Any], *args: Any, deadline: tuple[float, str], what: str) -> Any:
    """``fn(*args)`` in a child process under ``deadline`` (seconds, how it was set) when ``children``
    (a :class:`~placer.service.jobs.child.ChildJobs`) is given, else in this thread (the CLI)."""
    if children is None:
        return fn(*args)
    return children.run(fn, *args, deadline_s=deadline[0], why=deadline[1], what=what)
