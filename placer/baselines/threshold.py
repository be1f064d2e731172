"""The best of many variants of one baseline, solved as a search over them: ``prfaas``'s thresholds.

in:  a Problem, the baseline's :class:`~placer.ilp.formulation.Architecture` variants (``prfaas``: one
     per local datacenter and threshold θ, :func:`placer.baselines.policies.architectures`), a SolveConfig
out: :func:`best_variant` — the plan of the variant with the best MILP objective (a BCR solve: the best
     ratio goodput / cost), or InfeasiblePlanError naming the first variant's reason when none has a plan

``prfaas`` poses K + 1 thresholds per local datacenter, each its own MILP. Solving every one and
evaluating every plan (as :func:`placer.baselines.solve._best_variant` does for the few variants of
the other baselines) made a 7-datacenter, 10-class scenario 3× slower; so here:

* every variant is built, and its ceiling on goodput / cost from the capacity rows alone
  (:func:`placer.ilp.starts.capacity_bound`: the cheapest prefill and decode of each class among the
  pools the variant admits it to, valid whatever the SLA, mix or load) orders the search, best first;
* a variant whose ceiling is no better than the best ratio already solved is not solved (exact: the
  ceiling bounds every plan of it); each solved one may take a quarter of the time left
  (:data:`SHARE_OF_LEFT`), and a variant out of time is skipped (all out of time, none solved:
  SolveTimeoutError, as one solve would raise);
* variants are compared by the MILP's own objective (ratio, goodput, cost or served load), and only
  the winner is extracted and evaluated.
"""

from __future__ import annotations

import dataclasses
import math
import time

from placer.errors import InfeasiblePlanError, SolveTimeoutError
from placer.ilp.config import building_within
from placer.ilp.dinkelbach import Outcome, solve_objective
from placer.ilp.formulation import Architecture, Formulation, build
from placer.ilp.starts import capacity_bound
from placer.optimize import SolveConfig, extract
from placer.plan import Plan
from placer.problem import Problem

#: A variant is solved only when its ceiling exceeds the best ratio found by more than this (relative).
PRUNE_TOLERANCE = 1e-6
#: Each variant may take up to 1 / this of the time left (most end in hundredths of a second: an
#: infeasible threshold's LP, or a small MILP), so a slow one does not starve the best-ranked ones.
SHARE_OF_LEFT = 4


def _score(form: Formulation, outcome: Outcome, objective: str) -> float:
    """The variant's MILP objective at its solution (higher is better)."""
    values = outcome.values
    if objective == "bcr":
        return outcome.ratio
    if objective == "max-served":
        return values[form.g]
    if objective == "min-cost":
        return -sum(c * values[i] for i, c in form.cost.items())
    return sum(c * values[i] for i, c in form.goodput.items())


def best_variant(problem: Problem, archs: list[Architecture], config: SolveConfig, sla: bool) -> Plan:
    """The plan of the best of ``archs`` (each with ``enforce_sla`` = ``sla``), searched as the module
    docstring says."""
    config = config.started()
    objective = config.objective
    forms = []
    for arch in archs:
        with building_within(config):
            forms.append(build(problem, dataclasses.replace(arch, enforce_sla=sla), objective))
    ceiling = {id(f): (capacity_bound(f) if objective == "bcr" else None) for f in forms}
    order = sorted(forms, key=lambda f: -(ceiling[id(f)] or math.inf))
    best: tuple[float, Formulation, Outcome] | None = None
    reasons: list[str] = []
    timeout: SolveTimeoutError | None = None
    for i, form in enumerate(order):
        top = ceiling[id(form)]
        if best is not None and top is not None and top <= best[0] * (1 + PRUNE_TOLERANCE):
            break  # sorted by ceiling: no variant left can beat the best
        left = (config.deadline - time.monotonic()) if config.deadline is not None else config.time_limit_s
        if left <= 0:
            break
        try:
            outcome = solve_objective(form, config.but(time_limit_s=left / min(len(order) - i, SHARE_OF_LEFT)))
        except InfeasiblePlanError as err:
            reasons.append(err.reason)
            continue
        except SolveTimeoutError as err:
            timeout = timeout or err
            continue
        score = _score(form, outcome, objective)
        if best is None or score > best[0]:
            best = (score, form, outcome)
    if best is None:
        if timeout is not None:  # not proven infeasible: out of time, as a single solve would say
            raise timeout
        raise InfeasiblePlanError(reasons[0] if reasons else "no variant")
    return extract(best[1], best[2], objective)
