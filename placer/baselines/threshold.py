"""The best of many variants of one baseline, solved as a search over them: ``prfaas``'s thresholds.

in:  a Problem, the baseline's :class:`~placer.ilp.formulation.Architecture` variants in groups, each
     with a relaxed architecture whose plans include every variant's of the group (``prfaas``: per local
     datacenter, the free split and the K + 1 thresholds θ, :func:`placer.baselines.policies.prfaas_groups`),
     a SolveConfig
out: :func:`best_variant` — the plan of the variant with the best MILP objective (a BCR solve: the best
     ratio goodput / cost), or InfeasiblePlanError naming the first variant's reason when none has a plan

``prfaas`` poses K + 1 thresholds per local datacenter, each its own MILP. Building and solving every
one and evaluating every plan (as :func:`placer.baselines.solve._best_variant` does for the few
variants of the other baselines) made eight-dc's prfaas 4× slower; so here, for a BCR solve:

* a ceiling on goodput / cost from the capacity rows alone (:func:`placer.ilp.starts.capacity_bound`:
  the cheapest prefill and decode of each class among the pools the model admits it to, valid whatever
  the SLA, mix or load) bounds every plan of a model; a group's relaxed model admits each class to a
  superset of any variant's pools, so its ceiling bounds the whole group;
* groups, then the variants within a group, are searched best ceiling first, and a group or variant
  whose ceiling is no better than the best ratio already solved is neither built nor solved (exact);
* each solved variant may take a quarter of the time left (:data:`SHARE_OF_LEFT`), and one out of time
  is skipped (all out of time, none solved: SolveTimeoutError, as one solve would raise);
* variants are compared by the MILP's own objective (ratio, goodput, cost or served load), and only
  the winner is extracted and evaluated.

Other objectives search every variant, unpruned.
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


class _Search:
    """The best solved variant so far, and the reasons and timeouts of the others."""

    def __init__(self, problem: Problem, config: SolveConfig, sla: bool, variants: int) -> None:
        self.problem, self.config, self.sla, self.left_to_solve = problem, config.started(), sla, variants
        self.best: tuple[float, Formulation, Outcome] | None = None
        self.reasons: list[str] = []
        self.timeout: SolveTimeoutError | None = None

    def build(self, arch: Architecture) -> Formulation:
        with building_within(self.config):
            return build(self.problem, dataclasses.replace(arch, enforce_sla=self.sla), self.config.objective)

    def ceiling(self, form: Formulation) -> float:
        bound = capacity_bound(form) if self.config.objective == "bcr" else None
        return math.inf if bound is None else bound

    def beaten(self, ceiling: float) -> bool:
        """Whether nothing under ``ceiling`` can beat the best plan so far."""
        return self.best is not None and ceiling <= self.best[0] * (1 + PRUNE_TOLERANCE)

    def solve(self, form: Formulation) -> None:
        config = self.config
        left = config.deadline - time.monotonic() if config.deadline is not None else config.time_limit_s
        share = max(1, min(self.left_to_solve, SHARE_OF_LEFT))
        self.left_to_solve -= 1
        if left <= 0:
            self.timeout = self.timeout or SolveTimeoutError(config.time_limit_s)
            return
        try:
            outcome = solve_objective(form, config.but(time_limit_s=left / share))
        except InfeasiblePlanError as err:
            self.reasons.append(err.reason)
            return
        except SolveTimeoutError as err:
            self.timeout = self.timeout or err
            return
        score = _score(form, outcome, config.objective)
        if self.best is None or score > self.best[0]:
            self.best = (score, form, outcome)


def best_variant(problem: Problem, groups: list[tuple[Architecture, list[Architecture]]], config: SolveConfig,
                 sla: bool) -> Plan:
    """The plan of the best variant of ``groups`` (each with ``enforce_sla`` = ``sla``), searched as the
    module docstring says."""
    search = _Search(problem, config, sla, sum(len(variants) for _, variants in groups))
    if config.objective == "bcr" and len(groups) > 1:
        tops = [search.ceiling(search.build(relaxed)) for relaxed, _ in groups]
        groups = [g for _, g in sorted(zip(tops, groups), key=lambda pair: -pair[0])]
        tops = sorted(tops, reverse=True)
    else:
        tops = [math.inf] * len(groups)
    for top, (_, variants) in zip(tops, groups):
        if search.beaten(top):
            break
        forms = [search.build(arch) for arch in variants]
        for ceiling, form in sorted(((search.ceiling(f), f) for f in forms), key=lambda pair: -pair[0]):
            if search.beaten(ceiling):
                break
            search.solve(form)
    if search.best is None:
        if search.timeout is not None:  # not proven infeasible: out of time, as a single solve would say
            raise search.timeout
        raise InfeasiblePlanError(search.reasons[0] if search.reasons else "no variant")
    _, form, outcome = search.best
    return extract(form, outcome, config.objective)
