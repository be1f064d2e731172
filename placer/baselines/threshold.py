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

* a ceiling on goodput / cost from the capacity rows alone (the argument of
  :func:`placer.ilp.starts.capacity_bound`: each class's cheapest prefill and decode among the pools
  a model admits it to, valid whatever the SLA, mix or load) bounds every plan of a variant; it is read
  off the group's relaxed model, built once (its pools and prefill figures are a superset of every
  variant's of the group: a variant admits class k only to the P pools of one side), :func:`_ceiling`;
* variants are searched best ceiling first, each built only when its turn comes, and the search stops
  at the first whose ceiling is no better than the best ratio already solved (exact);
* a solve that must serve a least load (the whole load, ``min_served_fraction`` > 0) skips, unbuilt, a
  variant that cannot carry it for capacity alone (:func:`_carries`: the line into the local datacenter
  for the remote classes' KV, each side's chips for its classes' prefill) — most thresholds of a
  scenario no threshold carries whole, where proving each one infeasible by a MILP spent the budget;
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
from placer.flows import Route
from placer.pdd import P, P_MD
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


def _ceiling(relaxed: Formulation, arch: Architecture) -> float:
    """A ceiling on the goodput / cost of every plan of ``arch``, from its group's ``relaxed`` model:
    :func:`placer.ilp.starts.capacity_bound` over the P pools ``arch`` admits each class to. 0 when
    some class has no P pool (no plan serves it); inf when not derived (aggregated pools, or no decode pool)."""
    admitted = [[q for q in relaxed.pools if q.role == P and (k, q) in relaxed.prefill_s and _admits(arch, q.dc, k)]
                for k in range(len(relaxed.problem.classes))]
    if not all(admitted):
        return 0.0
    bound = capacity_bound(relaxed, admits=lambda k, q: _admits(arch, q.dc, k))
    return math.inf if bound is None else bound


def _admits(arch: Architecture, dc: str, k: int) -> bool:
    """Whether ``arch`` lets P pools in ``dc`` prefill class ``k``."""
    if arch.p_dcs is not None and dc not in arch.p_dcs:
        return False
    classes = arch.admits(dc)
    return classes is None or k in classes


def _carries(relaxed: Formulation, arch: Architecture, served_rps: float) -> str | None:
    """Why ``arch`` cannot serve ``served_rps`` for capacity alone (None: it may), from its group's
    ``relaxed`` model — necessary conditions, each a sum of rows of the MILP:

    * (C8) summed over the lines into the local datacenter: the remote classes' KV bytes
      s_k·G·wan_bytes[k] within u_L × those lines' Gbit/s;
    * (C3) + (C9) summed over one side's chips: each class k of the side needs at least
      s_k·G·min_p pre[k,p]·tp_p/u_p chip-seconds per second (its fastest P pool there, per chip), within
      the side's chips that have P pools."""
    problem = relaxed.problem
    local = next(iter(arch.decode_dcs or ()), None)
    remote = {dc for dc in (arch.p_dcs or ()) if dc != local}
    sent = [k for k in range(len(problem.classes)) if any(_admits(arch, dc, k) for dc in remote)]
    if remote and sent:
        gbit = sum(link.gbit_per_s * problem.line_capacity.get((src, dst), 1.0)
                   for (src, dst), link in problem.links.items() if dst == local and src in remote)
        need = sum(problem.classes[k].share * served_rps * Route(problem, problem.classes[k], P_MD, "", "", arch.drc)
                   .wan_bytes() * 8 / 1e9 for k in sent)
        if need > problem.options.link_utilization_cap * gbit * (1 + 1e-9):
            return (f"the remote classes' KV needs {need:.1f} Gbit/s over the lines into {local}, above "
                    f"{problem.options.link_utilization_cap:g} × {gbit:g} Gbit/s")
    for side in ({local} & set(arch.p_dcs or ()), remote):
        pools = [q for q in relaxed.pools if q.role == P and q.dc in side]
        ks = [k for k in range(len(problem.classes)) if any(_admits(arch, dc, k) for dc in side)]
        if not pools or not ks:
            continue
        chips = sum(problem.dc(dc).inventory.get(chip, 0) for dc, chip in {(q.dc, q.chip) for q in pools})
        need = sum(problem.classes[k].share * served_rps * min(relaxed.prefill_s[(k, q)] * q.tp / q.util
                                                              for q in pools if (k, q) in relaxed.prefill_s)
                   for k in ks)
        if need > chips * (1 + 1e-9):
            return f"prefill in {', '.join(sorted(side))} needs {need:.0f} chips busy, above their {chips}"
    return None


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
    least = problem.arrival_rps * (1.0 if config.objective == "min-cost" else problem.options.min_served_fraction)
    bcr = config.objective == "bcr"
    ranked = [(math.inf, arch) for _, variants in groups for arch in variants]
    if bcr or least > 0:
        ranked = []
        for relaxed, variants in groups:
            form = search.build(relaxed)
            for arch in variants:
                why = _carries(form, arch, least) if least > 0 else None
                if why:
                    search.reasons.append(f"cannot carry {least:g} req/s: {why}")
                else:
                    ranked.append((_ceiling(form, arch) if bcr else math.inf, arch))
        ranked.sort(key=lambda pair: -pair[0])
        search.left_to_solve = len(ranked)
    for ceiling, arch in ranked:
        if search.beaten(ceiling):
            break  # best ceiling first: no variant left can beat the best
        search.solve(search.build(arch))
    if search.best is None:
        if search.timeout is not None:  # not proven infeasible: out of time, as a single solve would say
            raise search.timeout
        raise InfeasiblePlanError(search.reasons[0] if search.reasons else "no variant")
    _, form, outcome = search.best
    return extract(form, outcome, config.objective)
