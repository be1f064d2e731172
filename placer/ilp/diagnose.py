"""Why no plan exists: a cause computed from the model (its LP relaxations), in the user's words.

in:  a built :class:`~placer.ilp.formulation.Formulation` (or a fleet's) that has no plan
out: :func:`diagnose`: one sentence naming what binds — no candidate pool, the hardware's most
     carry (inventory, power, lines) against the load, or the TTFT SLA: the classes late on every pool;
     where the LP relaxation carries the whole load within it, whole instances (the pools it uses in
     fractions, the hardware rows it fills); else the class whose requests are late at the most load that
     meets the SLA (computed from that LP's flows, not guessed from slack) and that load beside the asked one, with enough digits (and
     the shortfall in per cent) that the two never print alike; :func:`check_resolution` for loads too
     small for the solver's tolerance.
"""

from __future__ import annotations

import math

from placer.errors import InfeasiblePlanError
from placer.pdd import P, SLA_QUANTILE
from placer.ilp.backends import solve
from placer.ilp.covers import COVER_FAMILY
from placer.ilp.data import Flow
from placer.ilp.formulation import Formulation

# HiGHS's absolute feasibility tolerance (mip_feasibility_tolerance, its default): a row broken by less
# counts as met. Traffic columns are req/s, so a class whose demand s_k·G is below it can go unserved
# in a plan the solver calls feasible (issue 43: at 3e-6 req/s every class is, and the MILP's plan is
# empty); :func:`diagnose` says so rather than blaming the SLA.
SOLVER_FEASIBILITY_TOL = 1e-6
# Demands within this factor of the tolerance are not resolved reliably either (pdd-two-dc: no plan at
# 5e-6 req/s, a plan with no P at 1e-5, a different chip at 3e-5 than at 1e-4 and above).
RESOLVED_DEMANDS = 100


def diagnose(form: Formulation, lp_limit_s: float = 30.0) -> str:
    """A user-facing reason why no plan exists (a fleet: the first model with no plan even alone,
    else the shared capacities)."""
    members = getattr(form, "members", None)  # placer.ilp.fleet.FleetFormulation
    if members:
        return _fleet_cause(members, lp_limit_s)
    prob = form.problem
    if not any(q.role == P for q in form.pools):
        why = "; ".join(form.notes[:4]) or "no datacenter has enough chips"
        return f"no chip can host a prefill instance of {prob.model.name} ({why})"
    if not any(q.role != P for q in form.pools):
        why = "; ".join(form.notes[:4])
        return f"no chip can meet the TPOT SLA of {prob.tpot_s} s for {prob.model.name} ({why})"
    if not form.flows:
        return "no pipeline connects a prefill pool to a decode pool (check links and inventories)"
    required = form.model.vars[form.g].lb
    if _unresolved(form, required):
        return _below_resolution(form, required)
    carry = _max_carry(form, lp_limit_s=lp_limit_s)
    if carry < required * (1 - 1e-6):
        binds = "inventory, power or WAN bandwidth" if form.problem.links else "inventory or power"
        return (f"the hardware can carry at most {carry:.3g} of the required {required:.3g} req/s even ignoring "
                f"the TTFT SLA: {binds} binds (or lower options.min_served_fraction)")
    return _sla_cause(form, required, lp_limit_s)


def _unresolved(form: Formulation, required: float) -> bool:
    """Whether a required load of ``required`` req/s puts the largest class's demand within
    RESOLVED_DEMANDS times the solver's feasibility tolerance."""
    return 0 < required * max(c.share for c in form.problem.classes) < RESOLVED_DEMANDS * SOLVER_FEASIBILITY_TOL


def _below_resolution(form: Formulation, required: float) -> str:
    """Why a load too small for the solver's tolerance has no plan: the units, not the SLA."""
    share = max(c.share for c in form.problem.classes)
    return (f"the load of {required:.3g} req/s is too small for the solver to resolve: the largest class's demand "
            f"({share * required:.2g} req/s) is within {RESOLVED_DEMANDS}x its feasibility tolerance "
            f"({SOLVER_FEASIBILITY_TOL:g}), so a plan that serves nothing can pass as feasible; this says nothing "
            f"about the SLA. Plan for arrival_rps of at least {RESOLVED_DEMANDS * SOLVER_FEASIBILITY_TOL / share:.2g} "
            "req/s (a plan that meets the SLA at a larger load also meets it at this one)")


def _fleet_cause(members: list, lp_limit_s: float) -> str:
    """Why a fleet has no plan: a model that has none even with the hardware to itself (its own
    diagnosis), else the shared inventory, power and lines (each model fits alone, not all together)."""
    for mem in members:
        required = mem.form.model.vars[mem.form.g].lb
        if _max_carry(mem.form, with_sla=True, lp_limit_s=lp_limit_s) < required * (1 - 1e-6):
            return f"model {mem.name}: {diagnose(mem.form, lp_limit_s)}"
    return ("every model has a plan with the hardware to itself, but not all together: the shared inventory, "
            "power or WAN lines cannot carry every model's load (lower a workload, add hardware, or lower "
            "options.min_served_fraction)")


def _fastest(form: Formulation) -> dict[int, tuple[float, Flow]]:
    """Each class's fastest TTFT without queueing over every flow the model had, with that flow."""
    best: dict[int, tuple[float, Flow]] = {}
    for f, t in form.ttft_s.items():
        if f.k not in best or t < best[f.k][0]:
            best[f.k] = (t, f)
    return best


def _where(f: Flow) -> str:
    """Where a flow runs, in the user's words: its P pool, pipeline and (if it crosses) the line."""
    over = f" over the line {f.src}->{f.dst}" if f.crosses else ""
    return f"P {f.p.dc} {f.p.chip} tp{f.p.tp}, {f.pipeline}{over}"


def _sla_cause(form: Formulation, required: float, lp_limit_s: float = 30.0) -> str:
    """Why the TTFT SLA binds: the classes that are late even with no queueing (their share beyond
    the 10 % the P90 allows), or else the class with the least slack and the load the SLA allows."""
    prob = form.problem
    sla = prob.ttft_p90_s
    fastest = _fastest(form)
    hopeless = sorted((k for k, (t, _) in fastest.items() if t > sla), key=lambda k: -fastest[k][0])
    share = sum(prob.classes[k].share for k in hopeless)
    if share > 1 - SLA_QUANTILE + 1e-9:
        t, f = fastest[hopeless[0]]
        names = ", ".join(prob.classes[k].name for k in hopeless)
        return (f"the TTFT SLA of {sla} s cannot be met: class {prob.classes[hopeless[0]].name} needs "
                f"{t:.3f} s even with no queueing at its fastest ({_where(f)}); classes {names} "
                f"({100 * share:.0f} % of requests) are late on every pool, more than the "
                f"{100 * (1 - SLA_QUANTILE):.0f} % a P90 SLA allows")
    waits = ("queueing at prefill and WAN transfers make" if any(g.crosses for g in form.flows)
             else "queueing at prefill makes")
    most, values = _max_carry_values(form, with_sla=True, lp_limit_s=lp_limit_s)
    if values is not None and most >= required * (1 - 1e-6):
        return _whole_cause(form, required, values)
    late = _late_by_class(form, values) if values else {}
    # the class whose requests are late at the most load that meets the SLA (the LP's own flows);
    # without that LP, the class with the least slack at its fastest
    k = max(late, key=late.get) if late and max(late.values()) > 0 else \
        min((k for k in fastest if k not in hopeless), key=lambda k: sla - fastest[k][0])
    t, f = fastest[k]
    asked, can = two_rates(required, most)
    within = (f" (at most {can} req/s can meet it, {100 * (1 - most / required):.2g} % less)"
              if most < required * (1 - 1e-6) else "")
    which = f"the tightest class, {prob.classes[k].name}"
    which += (f" (the most late requests, {late[k]:.3g} req/s, at the most load that meets the SLA),"
              if late.get(k, 0) > 0 else ",")
    return (f"the TTFT P90 SLA of {sla} s cannot be met at {asked} req/s{within}: {waits} more than "
            f"{100 * (1 - SLA_QUANTILE):.0f} % of requests late; {which} needs {t:.3f} s with no queueing at its "
            f"fastest ({_where(f)}), leaving {sla - t:.3f} s for the queue")


#: Families of rows that count the hardware itself (a whole instance takes its chips from them).
_HARDWARE = ("inventory", "power", "budget")


def _whole_cause(form: Formulation, required: float, values: list[float]) -> str:
    """Why no plan exists when the LP relaxation carries the whole load within the SLA: only fractions of
    instances do. Names the pools that LP uses in fractions and the hardware rows it fills. (rnd-7-38 of
    the random catalog draws: every chip of 10 datacenter-chip pairs in use; the message blamed queueing
    at prefill "at 5.98830000 req/s".)"""
    full = [r.name for r in form.model.rows if r.family in _HARDWARE and r.sense == "<="
            and r.activity(values) >= r.rhs - 1e-6 * max(1.0, abs(r.rhs))]
    parts = sorted(((values[var], key) for key, var in form.n.items()
                    if values[var] > 0.005 and abs(values[var] - round(values[var])) > 1e-6), key=lambda t: -t[0])
    pools = ", ".join(f"{x:.2f} × {key.role} {key.datacenter} {key.chip} tp{key.tp}" for x, key in parts[:3])
    rows = ", ".join(full[:4]) + (f" and {len(full) - 4} more" if len(full) > 4 else "")
    return (f"no plan of whole instances carries {required:.4g} req/s within the TTFT P90 SLA of "
            f"{form.problem.ttft_p90_s} s; fractions of instances would (the LP relaxation: "
            + (pools or "no pool in fractions") + ")"
            + (f", with every chip of {rows} in use" if full else "")
            + ": add chips there, lower arrival_rps, or loosen the SLA")


def two_rates(asked: float, most: float) -> tuple[str, str]:
    """``asked`` and ``most`` with the fewest significant digits (3 to 9) at which they print apart
    (50.2 and 50.16, not 50.2 twice), in plain notation (1234.5, not 1.23e+03)."""
    for digits in range(3, 10):
        a, b = _plain(asked, digits), _plain(most, digits)
        if a != b:
            return a, b
    return _plain(asked, 9), _plain(most, 9)


def _plain(x: float, digits: int) -> str:
    """``x`` to ``digits`` significant digits, without an exponent."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def _late_by_class(form: Formulation, values: list[float]) -> dict[int, float]:
    """Late req/s of each class in a solution: each column's lateness (1 − its goodput coefficient)
    times its rate, summed by the column's class."""
    late: dict[int, float] = {}
    cols = [(f.k, var) for f, var in form.columns.x.items()]
    cols += [(k, var) for (k, _), var in form.columns.relay_in.items()]
    for k, var in cols:
        rate = values[var]
        if rate > 0:
            late[k] = late.get(k, 0.0) + (1.0 - form.goodput.get(var, 0.0)) * rate
    return late


def _max_carry(form: Formulation, with_sla: bool = False, lp_limit_s: float = 30.0) -> float:
    """Most req/s the pools could carry (LP relaxation), with the SLA row dropped unless ``with_sla``."""
    return _max_carry_values(form, with_sla, lp_limit_s)[0]


def _max_carry_values(form: Formulation, with_sla: bool = False,
                      lp_limit_s: float = 30.0) -> tuple[float, list[float] | None]:
    """:func:`_max_carry` and the LP's solution (None when it has none)."""
    m = form.model.relaxed()
    # (C18)'s right-hand side is the load G was bound to (placer.ilp.covers): not a row of a smaller load
    m.rows = [r for r in m.rows if r.family != COVER_FAMILY and (with_sla or r.family != "sla")]
    m.set_bounds(form.g, 0.0, m.vars[form.g].ub)
    m.maximize, m.objective = True, {form.g: 1.0}
    res = solve(m, "ortools", lp_limit_s)
    return (res.objective, res.values) if res.status.has_solution else (0.0, None)


def check_resolution(form: Formulation) -> None:
    """InfeasiblePlanError before any MILP when the load is too small for the solver to resolve: its
    plans there are not to be trusted either way (pdd-two-dc at 1e-5 req/s gave one with no P pool)."""
    if getattr(form, "members", None) is not None:  # a fleet: each model's rows are checked in its own build
        return
    required = form.model.vars[form.g].lb
    if _unresolved(form, required):
        raise InfeasiblePlanError(_below_resolution(form, required))


