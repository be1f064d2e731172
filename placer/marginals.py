"""A binding row's marginal value: what one more unit of the resource would add to BCR (split from
:mod:`placer.optimize`, which with :mod:`placer.optimize_fleet` calls it).

in:  a solved formulation and its outcome, the plan, a way to loosen a row and a way to re-solve
out: :func:`binding_rows` (the rows of the families a user can buy more of, at their bound),
     :func:`relaxed` (the problem with one row loosened by one unit, and the unit's words),
     :func:`priced` (each row's BCR change when re-solved within the budget, with the solvers' precision)
"""

from __future__ import annotations

import dataclasses
import math

from placer.ilp.config import SolveConfig
from placer.ilp.dinkelbach import Outcome
from placer.ilp.formulation import Formulation
from placer.plan import Binding, Plan
from placer.problem import Problem


BINDING_FAMILIES = ("link", "inventory", "power", "sla", "budget")
#: Seconds of budget a marginal-value re-solve needs to be started (it rebuilds the model first).
MARGINAL_MIN_S = 1.0


def binding_rows(form: Formulation, outcome: Outcome) -> list[str]:
    rows = []
    for row in form.model.rows:
        if row.family not in BINDING_FAMILIES:
            continue
        scale = max(1.0, abs(row.rhs))
        if row.slack(outcome.values) <= 1e-6 * scale:
            rows.append(row.name)
    return rows


def relaxed(problem: Problem, row: str, plan: Plan) -> tuple[Problem, str] | None:
    """The problem with one binding resource loosened by one unit, and the unit's words."""
    family, _, arg = row.partition("[")
    arg = arg.rstrip("]")
    if family == "link":
        s, d = arg.split("->")
        links = dict(problem.links)
        for a, b in ((s, d), (d, s)):
            links[(a, b)] = dataclasses.replace(links[(a, b)], gbit_per_s=links[(a, b)].gbit_per_s + 1.0)
        return dataclasses.replace(problem, links=links), f"+1 Gbit/s on {s}<->{d}"
    if family == "inventory":
        dc_name, chip = arg.split(",")
        step = min((p.tp for p in plan.pools if p.datacenter == dc_name and p.chip == chip), default=1)
        dcs = tuple(dataclasses.replace(dc, inventory={**dc.inventory, chip: dc.inventory[chip] + step})
                    if dc.name == dc_name else dc for dc in problem.datacenters)
        unit = "chip" if step == 1 else f"chips (one tp{step} instance)"
        return dataclasses.replace(problem, datacenters=dcs), f"+{step} {chip} {unit} in {dc_name}"
    if family == "power":
        dcs = tuple(dataclasses.replace(dc, power_kw=dc.power_kw + 10.0) if dc.name == arg else dc
                    for dc in problem.datacenters)
        return dataclasses.replace(problem, datacenters=dcs), f"+10 kW in {arg}"
    if family == "sla":
        return dataclasses.replace(problem, ttft_p90_s=problem.ttft_p90_s * 1.1), "a 10 % looser TTFT P90 SLA"
    return None


def warm_ratio(outcome: Outcome) -> float | None:
    return outcome.ratio if outcome.ratio == outcome.ratio and outcome.ratio > 0 else None  # nan-safe


def priced(rows: list[str], relax, resolve_relaxed, plan: Plan, config: SolveConfig, what: str) -> list[Binding]:
    """Each row with the change in BCR when ``relax(row)`` (a loosened problem and the unit's
    words, or None) is re-solved by ``resolve_relaxed(problem, config)``; within ``config``'s budget."""
    base = plan.metrics.bcr_requests_per_usd
    out = []
    config = config.started()
    for row in rows:
        relaxed = relax(row)
        if relaxed is None or config.left_s() < MARGINAL_MIN_S:
            out.append(Binding(constraint=row, marginal="not computed (time limit)" if relaxed else "-"))
            continue
        other, unit = relaxed
        try:
            better = resolve_relaxed(other, config.but(objective="bcr", marginals=False))
        except Exception as err:  # a marginal is advisory: report, never fail the plan
            out.append(Binding(constraint=row, marginal=f"not computed ({type(err).__name__})"))
            continue
        delta = better.metrics.bcr_requests_per_usd - base
        if abs(delta) <= 1e-9 * max(abs(base), 1.0):
            delta = 0.0  # floating-point noise of two equal plans, not a change of sign
        pct = 100 * delta / base if base > 0 else 0.0
        text = f"{unit}: {what} {delta:+.3f} req/USD ({pct:+.1f} %)"
        precision = _precision(plan, better)
        if delta != 0.0 and abs(pct) <= 100 * precision:
            text += f", within the solver's ±{100 * precision:.1f} % precision"
        out.append(Binding(constraint=row, marginal=text, delta_bcr_requests_per_usd=delta))
    return out


def _precision(plan: Plan, better: Plan) -> float:
    """How far apart two plans' BCRs may be from solver precision alone: each solve is proven within
    its reported gap of its optimum, so a marginal smaller than the larger gap has no sign."""
    gaps = [p.solver.mip_gap for p in (plan, better) if math.isfinite(p.solver.mip_gap)]
    return max(gaps, default=0.0)
