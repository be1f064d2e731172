"""Targeted cuts: re-solve with less planned load on one pool or one WAN line only.

in:  a Problem, :class:`Cuts` (physical pool → factor on its planned capacity; line →
     factor on its planned Gbit/s), a SolveConfig
out: the PDD plan under those cuts (:func:`solve_with_cuts`), metrics from
     :mod:`placer.evaluate` at its actual utilisations, checked by :func:`placer.validate.validate`

``optimize --verify`` (placer.sim.verify) finds from a simulation which pool's queue or
which line's transfers made the late requests and cuts just that. The cuts travel on the
Problem (``pool_capacity``, ``line_capacity``) and the formulation reads them as the κ of
its capacity rows: (C3) Σ pre·x ≤ κ_p·u_t·c_{p,t} for a P pool, (C6) Σ z·tokens·t_q ≤
κ_q·u·B_q·n_q for a decode pool, and their memory rows (C4), (C7) alike — a relay's KV held
during a slow transfer queues requests as surely as busy steps do — and (C8) Σ
x·wan_bytes·8/1e9 ≤ κ_L·u_L·Gbit/s for a line. The queueing law of a P tier (C11's
late[f]) is left as it was, which only overstates that pool's waits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from placer.errors import InputError
from placer.ilp.dinkelbach import solve_objective
from placer.ilp.formulation import build, pdd_architecture
from placer.optimize import SolveConfig, as_problem, extract
from placer.plan import Plan
from placer.validate import validate


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


def solve_with_cuts(scenario, cuts: Cuts, config: SolveConfig = SolveConfig()) -> Plan:
    """The PDD plan under ``cuts`` (InfeasiblePlanError / SolveTimeoutError as optimize)."""
    for factor in [*cuts.pools.values(), *cuts.lines.values()]:
        if not 0 < factor <= 1:
            raise InputError(f"cut factor must be in (0, 1], got {factor}")
    problem = dataclasses.replace(as_problem(scenario), pool_capacity=dict(cuts.pools), line_capacity=dict(cuts.lines))
    form = build(problem, pdd_architecture(problem), config.objective)
    missing = [f"pool {k}" for k in cuts.pools if k not in form.n]
    missing += [f"line {s}->{d}" for (s, d) in cuts.lines if (s, d) not in problem.links]
    outcome = solve_objective(form, config)
    plan = extract(form, outcome, config.objective)
    notes = [*plan.notes, *[f"validate: {i}" for i in validate(problem, plan)]]
    if cuts:
        notes.append(f"targeted cuts (planned capacity factors): {cuts.words()}")
    if missing:
        notes.append(f"cuts with no row to act on: {', '.join(missing)}")
    return plan.model_copy(update={"notes": notes})
