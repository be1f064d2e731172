"""Targeted cuts: re-solve with less planned load on one pool or one WAN line only.

in:  a Problem, :class:`Cuts` (physical pool → factor on its planned capacity; line →
     factor on its planned Gbit/s), a SolveConfig
out: the PDD plan under those cuts (:func:`solve_with_cuts`), metrics from
     :mod:`placer.evaluate` at its actual utilisations, checked by :func:`placer.validate.validate`

``optimize --verify`` (placer.sim.verify) finds from a simulation which pool's queue or
which line's transfers made the late requests and cuts just that. A cut scales the
capacity side of that pool's capacity rows — (C3) Σ pre·x ≤ u_t·c_{p,t} becomes
Σ pre·x ≤ f·u_t·c_{p,t} for a P pool, (C6) Σ z·tokens·t_q ≤ f·u·B_q·n_q for a decode
pool, and their memory rows (C4), (C7) alike, since a relay's KV held during a slow
transfer queues requests as surely as busy steps do — so the pool is planned at f
times its load; the queueing law of its
tier (C11's late[f]) is left as it was, which only overstates that pool's waits. A line
cut scales the rhs of (C8): Σ x·wan_bytes·8/1e9 ≤ f·u_L·Gbit/s. Nothing else changes.
The rows are edited on the built model, so the scenario and the formulation stay as
they are (a Problem-level per-pool cap read by the formulation would be the clean hook).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from placer.errors import InputError
from placer.ilp.dinkelbach import solve_objective
from placer.ilp.formulation import Formulation, build, pdd_architecture
from placer.optimize import SolveConfig, as_problem, extract
from placer.plan import Plan
from placer.validate import validate

#: Row families whose capacity side a pool cut scales; the WAN rows a line cut scales.
POOL_CAPACITY_FAMILIES = ("p_capacity", "p_memory", "decode_slots", "decode_memory")
LINE_FAMILY = "link"


@dataclass(frozen=True)
class Cuts:
    """Factors in (0, 1] on planned capacity: per physical pool (role, dc, chip, tp) and per
    directed line (src, dst). Absent means 1 (as planned)."""

    pools: dict[tuple, float] = field(default_factory=dict)
    lines: dict[tuple[str, str], float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.pools or self.lines)

    def words(self) -> str:
        parts = [f"{k[0]} {k[1]} {k[2]} tp{k[3]} ×{f:.2f}" for k, f in sorted(self.pools.items())]
        parts += [f"line {s}->{d} ×{f:.2f}" for (s, d), f in sorted(self.lines.items())]
        return ", ".join(parts) or "none"


def apply_cuts(form: Formulation, cuts: Cuts) -> list[str]:
    """Scale the rows ``cuts`` name in ``form`` (in place); return the cuts that found no row."""
    capacity_vars: dict[int, float] = {}
    for key, factor in cuts.pools.items():
        if key in form.n:
            capacity_vars[form.n[key]] = factor
        for q, var in getattr(form, "tier", {}).items():
            if q.key == key:
                capacity_vars[var] = factor
    touched_vars, touched_lines = set(), set()
    rows = form.model.rows
    for i, row in enumerate(rows):
        if row.family in POOL_CAPACITY_FAMILIES:
            hits = {v: f for v, f in capacity_vars.items() if row.coeffs.get(v, 0.0) < 0}
            if hits:
                coeffs = {v: c * hits.get(v, 1.0) for v, c in row.coeffs.items()}
                rows[i] = dataclasses.replace(row, coeffs=coeffs)
                touched_vars |= set(hits)
        elif row.family == LINE_FAMILY:
            for (s, d), factor in cuts.lines.items():
                if row.name == f"link[{s}->{d}]":
                    rows[i] = dataclasses.replace(row, rhs=row.rhs * factor)
                    touched_lines.add((s, d))
    missing = [f"pool {k}" for k in cuts.pools
               if form.n.get(k) not in touched_vars
               and not any(var in touched_vars for q, var in getattr(form, "tier", {}).items() if q.key == k)]
    missing += [f"line {s}->{d}" for (s, d) in cuts.lines if (s, d) not in touched_lines]
    return missing


def solve_with_cuts(scenario, cuts: Cuts, config: SolveConfig = SolveConfig()) -> Plan:
    """The PDD plan under ``cuts`` (InfeasiblePlanError / SolveTimeoutError as optimize)."""
    for factor in [*cuts.pools.values(), *cuts.lines.values()]:
        if not 0 < factor <= 1:
            raise InputError(f"cut factor must be in (0, 1], got {factor}")
    problem = as_problem(scenario)
    form = build(problem, pdd_architecture(problem), config.objective)
    missing = apply_cuts(form, cuts)
    outcome = solve_objective(form, config)
    plan = extract(form, outcome, config.objective)
    notes = [*plan.notes, *[f"validate: {i}" for i in validate(problem, plan)]]
    if cuts:
        notes.append(f"targeted cuts (planned capacity factors): {cuts.words()}")
    if missing:
        notes.append(f"cuts with no row to act on: {', '.join(missing)}")
    return plan.model_copy(update={"notes": notes})
