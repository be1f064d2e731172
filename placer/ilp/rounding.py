"""A plan first: the LP relaxation's least-cost solution rounded to whole instances and repaired.

in:  a built :class:`~placer.ilp.formulation.Formulation` and its LP relaxation's least-cost solution
     (:func:`placer.ilp.starts._lp_ratio_bound` computes it anyway, for the ratio bound)
out: :func:`rounded_plan`: a full solution of the MILP (integral counts, every row kept) or None

Why rounding rather than a greedy by marginal BCR: the LP already prices every route, queue tier and
line jointly, so its cheapest pools are where a plan goes; what the LP cannot give is whole
instances. Rounding each count n_q up keeps every capacity row (C3, C6, C7, C14-C16: more instances,
more room); only the rows that count the hardware itself (C9 inventory, C10 power, C12 budget) may
break, and are repaired by taking back the instances rounded up the most. With the counts fixed the
routing is an LP (every other column is continuous): the one carrying the most SLA goodput on those
pools is the plan (its cost is fixed, so the most goodput is the best ratio on them).

Where the inventory is tight the repair takes back instances the load needs (pdd-two-dc: three tp32
P on Ascend-910B leave no chips for the relay; sixteen-dc likewise), so :func:`_dive` re-solves: each
round fixes every fractional count (up where the hardware still holds, else down; backtracking
to the most nearly whole half, then one) and re-solves the least-cost LP on the LP's own sites, so the other shapes and chips there pay
for what was rounded down; a round without a plan is retried with one count, up then down. Then one
trim: the least-cost LP within the counts that carries the plan's goodput, rounded up again.

Measured (2 shared cores): pdd-two-dc 0.5 s, ratio 1 % below the optimum (the optimum's very pools);
sixteen-dc 7 s after the LP, 12 % below (the restricted seed MILP gives 0.2 % below in 3-5 s, so
:mod:`placer.ilp.dinkelbach` rounds first only on large models); 100 sites × 12 classes: ~7.5 s per
dive round, not done within 41 s (the whole model; its model without lines, :mod:`placer.ilp.local_first`, rounds
in 4-5 s). Without lines 100 × 8 rounds in 12 s and 64 × 12 in 4 s, since a dive that finds no plan on the LP's
sites opens the others (before: no plan, after 35 s and 7 s). The plan is a MILP solution (checked with
:meth:`~placer.ilp.model.LinearModel.violations`), so Dinkelbach starts from it from below and a time
limit returns at least it, with the LP ratio bound as its certified gap.
"""

from __future__ import annotations

import math
import time

from placer.ilp.backends import solve
from placer.ilp.model import LinearModel

#: Families of rows whose terms are the counts alone (rounding up may break them: repaired).
HARDWARE_FAMILIES = ("inventory", "power", "budget")
#: A count the LP sets below this is 0 (solver noise), and a count within it of an integer is that integer.
COUNT_EPS = 1e-6


def rounded_plan(model: LinearModel, counts: list[int], cost: dict[int, float], goodput: dict[int, float],
                 lp_values: list[float], time_limit_s: float,
                 site_of: dict[int, tuple] | None = None, open_sites: bool = False) -> list[float] | None:
    """A solution of ``model`` (every row and bound, counts integral) near ``lp_values``, or None.

    ``counts``: the integer columns (pool counts n_q); ``cost``, ``goodput``: the objective's
    coefficients (the routing LP maximises goodput, the trim minimises cost); ``lp_values``: the LP
    relaxation's solution to round. ``time_limit_s`` bounds all of its LPs together. ``site_of``, ``open_sites``: the
    dive's (:func:`_dive`)."""
    deadline = time.monotonic() + time_limit_s  # one budget for every LP below

    def left() -> float:
        return deadline - time.monotonic()

    fixed = _round_up(model, counts, lp_values)
    best = None if fixed is None else _route(model, fixed, goodput, left())
    if best is None and left() > 0:  # the hardware rows broke, or the repair took back instances the load needed
        fixed = _dive(model, counts, cost, lp_values, left(), site_of, open_sites)
        best = None if fixed is None or left() <= 0 else _route(model, fixed, goodput, left())
    if best is None:
        return None
    if left() > 0:
        trimmed = _trimmed(model, counts, cost, goodput, best, fixed, left())
        if trimmed != fixed and left() > 0:
            other = _route(model, trimmed, goodput, left())
            if other is not None and ratio(cost, goodput, other) > ratio(cost, goodput, best):
                best = other
    return best


def _round_up(model: LinearModel, counts: list[int], values: list[float]) -> dict[int, int] | None:
    """Each count rounded up, then the hardware rows repaired by taking back the most-rounded-up
    instances first; None when a hardware row cannot be repaired (only counts of zero left)."""
    fixed = {}
    for var in counts:
        x = max(0.0, values[var])
        up = 0 if x <= COUNT_EPS else math.ceil(x - COUNT_EPS)
        fixed[var] = int(min(up, model.vars[var].ub))
    for row in model.rows:
        if row.family not in HARDWARE_FAMILIES or row.sense != "<=":
            continue
        while sum(c * fixed.get(i, 0) for i, c in row.coeffs.items()) > row.rhs + COUNT_EPS * max(1.0, abs(row.rhs)):
            # the instance rounded up most (by count, not cost) goes first: it is the one the LP needed least
            held = [i for i in row.coeffs if fixed.get(i, 0) > 0 and row.coeffs[i] > 0]
            if not held:
                return None
            i = max(held, key=lambda j: (fixed[j] - values[j], row.coeffs[j]))
            fixed[i] -= 1
    return fixed


#: Rounds of :func:`_dive` (each one LP) before it gives up.
DIVE_ROUNDS = 30
#: Share of the fractional counts a dive round fixes (at least one).
DIVE_SHARE = 0.5


def _dive(model: LinearModel, counts: list[int], cost: dict[int, float], values: list[float],
          time_limit_s: float, site_of: dict[int, tuple] | None = None, open_sites: bool = False) -> dict[int, int] | None:
    """Counts by diving: each round fixes the counts the LP has whole (not zeros) and every fractional
    one (up where the hardware rows still hold with the counts fixed before it and the others at the
    LP's values, else down), then re-solves the least-cost LP with those fixed, so the instances the
    rounding moved are paid for elsewhere (pools at zero stay free). A round whose LP has no plan is
    undone and tried with the most nearly whole half, then that count alone, up, then down; None when
    none has one. (Half the fractional counts per round, as first written, took 12 rounds of ~7 s on
    100 sites × 12 classes without finishing: each LP moved the rest onto pools it had left at zero.)
    ``site_of``: each count's (datacenter, chip); the dive then keeps to the sites the first LP used
    (every role and shape of those chips), as :func:`placer.ilp.dinkelbach._restricted_seed` does; with
    ``open_sites``, until a round with every fractional count rounded has no plan on them: an LP that fills its sites
    (10 sites × 4 classes, 64 × 12, 100 × 8 without lines) leaves no room there for whole instances, so the other
    sites are opened from that round on. Without it such a dive ends without a plan, soon: where the rounding only
    hints a seed MILP that finds a plan in seconds (small models), a longer dive took that MILP's time (rnd-7-4-trace
    of ``bench_agreement.py --random``: no plan within 20 s)."""
    lp = model.relaxed()
    lp.maximize, lp.objective = False, dict(cost)
    outside: list[int] = []  # counts held at 0 while the dive keeps to the LP's sites
    if site_of is not None:  # only the chips (datacenter, chip) the LP used: a far smaller LP per round
        used = {site_of[v] for v in counts if values[v] > COUNT_EPS}
        outside = [var for var in counts if site_of[var] not in used]
        for var in outside:
            lp.fix(var, 0.0)
    deadline = time.monotonic() + time_limit_s
    hardware = [r for r in model.rows if r.family in HARDWARE_FAMILIES and r.sense == "<="]
    fixed: dict[int, int] = {}
    for _ in range(DIVE_ROUNDS):
        if time.monotonic() >= deadline:
            return None
        fractional = []
        for var in counts:
            if var in fixed:
                continue
            x = max(0.0, values[var])
            if x <= COUNT_EPS:
                continue  # left free: a later round may need this pool for what it rounds down
            if abs(x - round(x)) <= COUNT_EPS:
                fixed[var] = int(round(x))
                lp.fix(var, float(fixed[var]))  # held in the LPs after it too, or they move it and the
                # counts returned break the hardware rows (100 sites × 12 classes: 11 inventory rows)
            else:
                fractional.append(var)
        if not fractional:
            return {var: fixed.get(var, 0) for var in counts}
        fractional.sort(key=lambda v: -(values[v] - math.floor(values[v])))
        # every fractional count at once; where that LP has no plan, the most nearly whole half, then the
        # most nearly whole count alone, up, then down
        half = fractional[:max(1, int(DIVE_SHARE * len(fractional)))]
        top = fractional[0]
        tries = [{var: _rounded(model, hardware, fixed, values, var) for var in batch}
                 for batch in (fractional, half) if batch is fractional or len(half) < len(fractional)]
        tries += [{top: math.ceil(values[top])}, {top: math.floor(values[top])}]
        for attempt in tries:
            res = _attempt(model, lp, attempt, deadline)
            if res is None and open_sites and outside and attempt is tries[0]:
                # every count rounded at once has no plan on the LP's sites, which it filled (10 sites × 4 classes,
                # 64 × 12 and 100 × 8 without lines: the dive then fixed one count a round and ran out of rounds):
                # the other sites are opened for the rest of the dive
                for var in outside:
                    lp.set_bounds(var, 0.0, model.vars[var].ub)
                outside = []
                res = _attempt(model, lp, attempt, deadline)
            if res is not None:
                fixed.update(attempt)
                values = res.values
                break
        else:
            return None
    return None


def _attempt(model: LinearModel, lp: LinearModel, attempt: dict[int, int], deadline: float):
    """The dive's least-cost LP with ``attempt``'s counts fixed: its result, or None (the counts freed again)."""
    for var, count in attempt.items():
        lp.fix(var, float(count))
    res = solve(lp, "ortools", max(0.001, deadline - time.monotonic()))
    if res.status.has_solution:
        return res
    for var in attempt:
        lp.set_bounds(var, 0.0, model.vars[var].ub)
    return None


def _rounded(model: LinearModel, hardware: list, fixed: dict[int, int], values: list[float], var: int) -> int:
    """``var``'s count rounded up where every hardware row it is in still holds with the counts fixed so
    far and the others at ``values``, else down."""
    up = math.ceil(values[var])
    trial = [*values]
    for i, c in fixed.items():
        trial[i] = c
    trial[var] = up
    fits = all(r.activity(trial) <= r.rhs + COUNT_EPS * max(1.0, abs(r.rhs)) for r in hardware if var in r.coeffs)
    return min(int(model.vars[var].ub), up if fits else math.floor(values[var]))


def _route(model: LinearModel, fixed: dict[int, int], goodput: dict[int, float],
           time_limit_s: float) -> list[float] | None:
    """The routing LP on the fixed counts (the most SLA goodput); its solution, or None when the counts
    carry no plan (or the LP found none in time)."""
    # other integer columns (whole-instance P queues, ``Pool.whole``) stay integer: with the counts fixed,
    # a MILP over those few columns (rounding them all down, up or off at once left the flagship no plan)
    return _route_lp(model, fixed, goodput, time_limit_s,
                     keep_integers=any(v.integer and v.index not in fixed for v in model.vars))


def _route_lp(model: LinearModel, fixed: dict[int, int], goodput: dict[int, float],
              time_limit_s: float, keep_integers: bool = False) -> list[float] | None:
    """:func:`_route`'s LP (``keep_integers``: MILP): the most SLA goodput on the fixed columns; None
    unless it keeps ``model``."""
    lp = model.relaxed() if not keep_integers else LinearModel(
        vars=list(model.vars), rows=list(model.rows), maximize=model.maximize, _by_name=dict(model._by_name))
    for var, count in fixed.items():
        lp.fix(var, float(count))
    lp.maximize, lp.objective = True, dict(goodput)
    res = solve(lp, "ortools", max(0.001, time_limit_s))
    if not res.status.has_solution:
        return None
    values = list(res.values)
    for var, count in fixed.items():
        values[var] = float(count)  # exactly integral (the LP returns them within its tolerance)
    if sum(c * values[i] for i, c in goodput.items()) <= COUNT_EPS or model.violations(values):
        return None
    return values


def _trimmed(model: LinearModel, counts: list[int], cost: dict[int, float], goodput: dict[int, float],
             values: list[float], fixed: dict[int, int], time_limit_s: float) -> dict[int, int]:
    """The counts of the least-cost LP plan within ``fixed`` (no count above it, so the hardware rows
    hold) that carries at least ``values``' goodput, rounded up again: the instances the first
    rounding gave away that this goodput does not need come back."""
    lp = model.relaxed()
    for var, count in fixed.items():
        lp.set_bounds(var, 0.0, float(count))
    good = sum(c * values[i] for i, c in goodput.items())
    lp.add("goodput_floor", "goodput_floor", dict(goodput), ">=", good * (1 - 1e-6))
    lp.maximize, lp.objective = False, dict(cost)
    res = solve(lp, "ortools", max(0.001, time_limit_s))
    if not res.status.has_solution:
        return fixed
    return {var: min(fixed[var], 0 if res.values[var] <= COUNT_EPS else math.ceil(res.values[var] - COUNT_EPS))
            for var in counts}


def ratio(cost: dict[int, float], goodput: dict[int, float], values: list[float]) -> float:
    """SLA goodput per USD/h of a solution (0 when it costs nothing)."""
    spend = sum(c * values[i] for i, c in cost.items())
    return sum(c * values[i] for i, c in goodput.items()) / spend if spend > 0 else 0.0
