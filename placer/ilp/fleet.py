r"""The fleet MILP: several models on one set of datacenters, chips, power and WAN lines.

in:  a :class:`~placer.problem.FleetProblem` (one Problem per model) and the objective
out: a :class:`FleetFormulation` — one MILP that :mod:`placer.ilp.dinkelbach` solves like any
     other — and, from its solution, each model's own values (:meth:`Member.values`).

Formulation (composed from :func:`placer.ilp.formulation.build`, which is not changed)
-----------
Sets: M the models; for each m ∈ M the sets, parameters and variables of the single-model
MILP (placer.ilp.formulation) built from m's Problem: its own classes, workload, SLA, pools
q_m = (role, dc, chip, tp), flows and served load G_m. Every variable and row of model m is
named ``m/<its single-model name>`` (e.g. ``chat/n[P,dc-a,H800,tp8]``).

Rows kept per model (each model's own): C0–C7, C11 (its SLA on its own served load), C13–C16.
Rows shared — one row summing every model's terms (the single-model row's name, unprefixed):

(F8)  link       Σ_m Σ_{f ∈ F_m over s→d} x_f · wan_bytes_m[k,d] · 8/1e9 ≤ κ_L · u_L · Gbit/s(s→d) (C8's terms)
(F9)  inventory  Σ_m Σ_{q_m of chip c in dc} tp · n_q ≤ inventory[dc][c]
(F10) power      Σ_m Σ_{q_m in dc} power_q · n_q ≤ power_kw[dc]
(F12) budget     Σ_m Σ price_q n_q ≤ budget (max-goodput only)
(F2)  fleet load G = Σ_m G_m (each G_m keeps its own C2 bounds)

Objective: the single-model objective over the fleet's sums — goodput = Σ_m goodput_m,
cost = Σ_m cost_m: bcr maximises the fleet's goodput per dollar (Dinkelbach, unchanged),
min-cost carries every model's whole load at least cost, max-goodput the most goodput
within the budget. A model's own BCR then follows from its share of the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from placer.ilp.formulation import Formulation, build, pdd_architecture
from placer.ilp.model import LinearModel
from placer.problem import FleetProblem, Problem

__all__ = ["SHARED_FAMILIES", "FleetFormulation", "Member", "build_fleet"]

#: Row families whose capacity the models share (summed into one row each).
SHARED_FAMILIES = ("inventory", "power", "link", "budget")
SEPARATOR = "/"  # between a model's name and its variable or row name


@dataclass
class Member:
    """One model inside the fleet MILP: its own formulation and where its variables start."""

    name: str
    form: Formulation
    offset: int

    def values(self, fleet_values: list[float]) -> list[float]:
        """This model's variable values, in its own formulation's order."""
        return fleet_values[self.offset:self.offset + len(self.form.model.vars)]


@dataclass
class FleetFormulation(Formulation):
    """A :class:`Formulation` over the whole fleet: ``model`` the joint MILP, ``goodput``/``cost``
    the fleet's sums, ``g`` the fleet's served load, ``n`` keyed (role, dc, chip, tp, model);
    the per-flow maps are each member's own (``members``)."""

    members: list[Member] = field(default_factory=list)


def _copy_rows(m: LinearModel, form: Formulation, name: str, offset: int, shared: dict[str, list]) -> None:
    """Model ``name``'s variables and own rows into ``m`` (prefixed), its shared rows into ``shared``."""
    for v in form.model.vars:
        m.var(f"{name}{SEPARATOR}{v.name}", v.lb, v.ub, v.integer)
    for row in form.model.rows:
        coeffs = {i + offset: c for i, c in row.coeffs.items()}
        if row.family in SHARED_FAMILIES:
            entry = shared.setdefault(row.name, [row.family, {}, row.sense, row.rhs])
            entry[1].update(coeffs)  # (F8)–(F10), (F12): the same limit, every model's terms
        else:
            m.add(f"{name}{SEPARATOR}{row.name}", row.family, coeffs, row.sense, row.rhs)


def build_fleet(fleet: FleetProblem, objective: str = "bcr",
                member: Callable[[str, Problem], Formulation] | None = None) -> FleetFormulation:
    """The joint MILP of every model of ``fleet`` (see the module docstring). ``member`` builds one
    model's formulation (default: PDD's, for ``objective``); `evaluate` passes one that pins the
    model's pools and routes to a given plan's before the rows are joined."""
    m = LinearModel()
    shared: dict[str, list] = {}
    members: list[Member] = []
    for name, problem in fleet.members:
        form = member(name, problem) if member else build(problem, pdd_architecture(problem), objective)
        offset = len(m.vars)
        _copy_rows(m, form, name, offset, shared)
        members.append(Member(name, form, offset))
    for row_name, (family, coeffs, sense, rhs) in shared.items():
        m.add(row_name, family, coeffs, sense, rhs)
    loads = [m.vars[mem.offset + mem.form.g] for mem in members]
    g = m.var("G", sum(v.lb for v in loads), sum(v.ub for v in loads))
    m.add("fleet_load", "fleet_load", {g: 1.0, **{v.index: -1.0 for v in loads}}, "==", 0.0)  # (F2)

    def merged(attr: str) -> dict[int, float]:
        return {i + mem.offset: c for mem in members for i, c in getattr(mem.form, attr).items()}

    total = dataclasses.replace(fleet.shared, name=fleet.name,
                                arrival_rps=sum(p.arrival_rps for _, p in fleet.members))
    return FleetFormulation(
        problem=total, arch=members[0].form.arch, model=m,
        pools=[q for mem in members for q in mem.form.pools],
        n={(*key, mem.name): var + mem.offset for mem in members for key, var in mem.form.n.items()},
        tier={}, flows=[], x={}, z={}, g=g, goodput=merged("goodput"), cost=merged("cost"),
        instances={}, ttft_s={}, notes=[f"{mem.name}: {note}" for mem in members for note in mem.form.notes],
        members=members)
