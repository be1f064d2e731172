"""PD baselines in the same model, prices and SLA, for `placer compare`.

in:  a Problem
out: one Plan per baseline (or the reason it has none):

* ``same-dc-pd``: the best single chip type in one datacenter, plain PD over RDMA
  (every (datacenter, chip) pair is solved; the best BCR wins).
* ``cross-dc-pd``: P in one datacenter, D in another, the full KV over the WAN
  (no RelayDecode, no decode-side radix cache).
* ``hetero-same-dc-pd``: Splitwise-style, different chips for P and D allowed, one
  datacenter (each datacenter is solved; the best wins).
* ``agg``: aggregated serving only (role A, :mod:`placer.aggregated`: chunked prefill
  mixed into decode batches), any chips in any datacenters — no KV crosses anything, so
  each request is served where it lands; the answer to "is disaggregation worth it here?".
"""

from __future__ import annotations

import dataclasses

from placer.errors import InfeasiblePlanError, PlacerError
from placer.flows import P_A, P_D
from placer.ilp.formulation import Architecture
from placer.optimize import SolveConfig, optimize, solve_architecture
from placer.plan import Plan
from placer.problem import Problem

BASELINES = ("same-dc-pd", "cross-dc-pd", "hetero-same-dc-pd", "agg")


def architectures(problem: Problem, name: str) -> list[Architecture]:
    if name == "same-dc-pd":
        return [
            Architecture(name, (P_D,), drc=False, p_dcs=frozenset({dc.name}), decode_dcs=frozenset({dc.name}),
                         chips=frozenset({chip}), same_dc=True)
            for dc in problem.datacenters for chip in sorted(dc.inventory)
        ]
    if name == "cross-dc-pd":
        return [Architecture(name, (P_D,), drc=False, same_dc=False)]
    if name == "hetero-same-dc-pd":
        return [
            Architecture(name, (P_D,), drc=False, p_dcs=frozenset({dc.name}), decode_dcs=frozenset({dc.name}),
                         same_dc=True)
            for dc in problem.datacenters
        ]
    if name == "agg":
        return [agg_architecture()]
    raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")


def agg_architecture() -> Architecture:
    """The all-aggregated baseline: pipeline A only, every datacenter and chip."""
    return Architecture("agg", (P_A,), drc=False)


def solve_baseline(problem: Problem, name: str, config: SolveConfig = SolveConfig()) -> Plan:
    """The best plan of baseline ``name``.

    A baseline that cannot carry the whole offered load is shown at the load it can
    carry; one that cannot meet the TTFT SLA at all is shown without the SLA row (its
    SLA goodput, and so its BCR, then counts only the requests that do meet it).
    InfeasiblePlanError when even that has no plan.
    """
    objective = config.objective
    attempts = [
        (problem, objective, True, None),
        (_with_min_served(problem, 0.0), objective, True,
         "cannot carry the whole offered load; shown at the load it can"),
        (problem, "min-cost", False,
         "cannot meet the TTFT SLA; shown as the cheapest plan carrying the load without the SLA constraint"),
        (_with_min_served(problem, 0.0), "max-served", False,
         "cannot meet the TTFT SLA nor carry the load; shown carrying the most it can"),
    ]
    first_error = None
    for prob, obj, sla, note in attempts:
        try:
            plan = _best_variant(prob, name, config.but(objective=obj), sla)
        except InfeasiblePlanError as err:
            first_error = first_error or err
            continue
        notes = [f"baseline {name}", *([note] if note else []), *plan.notes]
        return plan.model_copy(update={"objective": objective, "notes": notes})
    raise InfeasiblePlanError(f"baseline {name}: {first_error.reason}")


def _with_min_served(problem: Problem, fraction: float) -> Problem:
    return dataclasses.replace(problem, options=problem.options.model_copy(update={"min_served_fraction": fraction}))


def _best_variant(problem: Problem, name: str, config: SolveConfig, sla: bool) -> Plan:
    best, reasons = None, []
    objective = config.objective
    archs = [dataclasses.replace(a, enforce_sla=sla) for a in architectures(problem, name)]
    for arch in archs:
        try:
            plan, _, _ = solve_architecture(problem, arch, config.but(time_limit_s=config.time_limit_s / len(archs)))
        except InfeasiblePlanError as err:
            reasons.append(err.reason)
            continue
        if best is None or _score(plan, objective) > _score(best, objective):
            best = plan
    if best is None:
        raise InfeasiblePlanError(reasons[0] if reasons else "no variant")
    return best


def _score(plan: Plan, objective: str) -> float:
    if objective == "max-served":
        return plan.metrics.served_rps
    if objective == "min-cost":
        return -plan.metrics.cost_usd_per_h
    if objective == "max-goodput":
        return plan.metrics.goodput_rps
    return plan.metrics.bcr_requests_per_usd


def compare(problem: Problem, config: SolveConfig = SolveConfig(), pdd: Plan | None = None) -> dict:
    """``{"pdd": plan, "baselines": {name: plan or {"error": reason}}}``."""
    pdd = pdd or optimize(problem, config.but(marginals=False))
    out = {}
    for name in BASELINES:
        try:
            out[name] = solve_baseline(problem, name, config)
        except PlacerError as err:
            out[name] = {"error": str(err)}
    return {"pdd": pdd, "baselines": out}
