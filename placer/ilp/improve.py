"""A better plan by fix-and-optimise over a few datacenters at a time (issue 47: the plan at fleet scale).

in:  a built :class:`~placer.ilp.formulation.Formulation`, one of its plans (values, every row kept) and a
     time budget; optionally a score per datacenter (lower: cheaper per request, e.g. the LP's)
out: :func:`improve`: a plan of the same model at a ratio (SLA goodput per USD/h) at least the given one's,
     and that ratio

How: each step frees the columns of a small group of datacenters (every column whose datacenters are all in
the group: its pools' counts, queue shares, flows, decode splits; the others keep the plan's values) and
solves Dinkelbach's MILP at the plan's ratio λ, max goodput − λ·cost, on that sub-model alone
(:func:`sub_model`: the fixed columns' terms moved to the right-hand sides), the plan as its hint. The plan
restricted is a solution of it (F = 0), so a solution with F > 0 is a plan of the whole model at a higher
ratio (goodput − λ·cost > 0 ⇔ goodput/cost > λ); it is checked against every row before it is kept. A group
is a seed datacenter (the plan's, dearest per request first, each in turn), the datacenters one line from it
(where the model has lines: a flow between them is a free column) and the cheapest by ``score`` (where the
load moved off the seed can go), up to :data:`GROUP_SITES`.

Why: the sub-model of 8 of 100 datacenters is ~8 % of the whole model's columns, so HiGHS solves it in
seconds where a MILP on the whole model (100 sites × 12 classes: 1,811 integer columns without lines, 2,858
with) stalls on the decoders' whole instances; the bound is not this module's (a plan, not a proof).
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, defaultdict

from placer.ilp.backends import solve
from placer.ilp.formulation import Formulation
from placer.ilp.model import LinearModel, Var
from placer.ilp.starts import _cost, _f_objective, _goodput

#: Datacenters freed per step.
GROUP_SITES = 8
#: Share of a group taken from the cheapest datacenters by ``score`` (the rest: the seed and its neighbours).
CHEAP_SHARE = 0.34
#: Rounds over the used datacenters without a better plan before the groups double in size.
ROUNDS_PER_SIZE = 3
#: Seconds one step's MILP may take at most.
STEP_S = 8.0
#: A step's ratio must beat the plan's by this share to be kept (solver noise).
MIN_GAIN = 1e-7


def column_sites(form: Formulation) -> dict[int, frozenset[str]]:
    """Each column's datacenters: a pool's count and queue shares its own, a flow its P pool's and its
    destination's, a decode split its pool's and its destination's; any other column (a set queue's whole
    count) those of the mapped columns it shares rows with, where they are one datacenter. Columns left
    out (the served load G) belong to no group and keep the plan's value."""
    sites: dict[int, frozenset[str]] = {}
    for key, var in form.n.items():
        sites[var] = frozenset({key[1]})
    for pool, var in form.tier.items():
        sites[var] = frozenset({pool.dc})
    for f, var in form.columns.x.items():
        sites[var] = frozenset({f.p.dc, f.dst})
    for (_, p), var in form.columns.relay_in.items():
        sites[var] = frozenset({p.dc})
    for (_, s, d), var in form.columns.relay_out.items():
        sites[var] = frozenset({s, d})
    for key, var in form.z.items():
        sites[var] = frozenset({key[-1].dc} | ({key[2]} if key[2] else set()))
    # the rest (a mix queue's total X_t, a set queue's whole count): the datacenters every column beside them
    # in every row names (a queue's flows go to many destinations but leave from its pool's datacenter)
    common: dict[int, frozenset[str]] = {}
    for row in form.model.rows:
        own = [i for i in row.coeffs if i not in sites and i != form.g]
        if not own:
            continue
        near = [sites[i] for i in row.coeffs if i in sites]
        inner = frozenset.intersection(*near) if near else frozenset()
        for i in own:
            common[i] = common[i] & inner if i in common else inner
    sites.update({i: ds for i, ds in common.items() if ds})
    return sites


def sub_model(model: LinearModel, free: list[int], values: list[float], rows: list[int]) -> LinearModel:
    """``model`` on the columns ``free`` alone (renumbered in that order), every other column at ``values``:
    its terms moved to the right-hand side of ``rows``, the rows the free columns are in (the others hold
    already: the plan keeps them)."""
    at = {var: j for j, var in enumerate(free)}
    sub = LinearModel(maximize=model.maximize)
    for var in free:
        v = model.vars[var]
        sub.vars.append(Var(at[var], v.name, v.lb, v.ub, v.integer))
        sub._by_name[v.name] = at[var]
    for r in rows:
        row = model.rows[r]
        coeffs, rhs = {}, row.rhs
        for i, c in row.coeffs.items():
            if i in at:
                coeffs[at[i]] = c
            else:
                rhs -= c * values[i]
        sub.add(row.name, row.family, coeffs, row.sense, rhs)
    sub.objective = {at[i]: c for i, c in model.objective.items() if i in at}
    return sub


def _rows_of(model: LinearModel) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = defaultdict(list)
    for r, row in enumerate(model.rows):
        for i in row.coeffs:
            rows[i].append(r)
    return rows


def _ratio(form: Formulation, values: list[float]) -> float:
    cost = _cost(form, values)
    return _goodput(form, values) / cost if cost > 0 else 0.0


def site_costs(form: Formulation, values: list[float]) -> tuple[dict[str, float], dict[str, float]]:
    """USD/h and SLA goodput (req/s, by the P pool's datacenter) of each datacenter in a plan."""
    cost: dict[str, float] = defaultdict(float)
    good: dict[str, float] = defaultdict(float)
    for key, var in form.n.items():
        cost[key[1]] += form.cost.get(var, 0.0) * values[var]
    for f, var in form.columns.x.items():
        good[f.p.dc] += form.goodput.get(var, 0.0) * values[var]
    for (_, p), var in form.columns.relay_in.items():
        good[p.dc] += form.goodput.get(var, 0.0) * values[var]
    return cost, good


def group(form: Formulation, values: list[float], score: dict[str, float] | None, size: int,
          neighbours: dict[str, set[str]], tried: Counter, rng: random.Random) -> set[str]:
    """A group of ``size`` datacenters for a plan: its used datacenters least often ``tried`` and dearest per
    goodput first, a quarter from the lines around the first of them (where the model has lines) and a share
    (:data:`CHEAP_SHARE`) of the cheapest by ``score`` least often tried (where the load they shed can go)."""
    cost, good = site_costs(form, values)
    used = sorted((s for s in cost if cost[s] > 1e-9), key=lambda s: (tried[s], -cost[s] / max(good[s], 1e-9)))
    if not used:
        return set()
    cheap_n = int(CHEAP_SHARE * size) if score else 0
    near_n = size // 4 if neighbours else 0
    chosen = set(used[:max(1, size - cheap_n - near_n)])
    frontier = sorted(neighbours.get(used[0], ()))
    while frontier and len(chosen) < size - cheap_n:
        s = frontier.pop(rng.randrange(len(frontier)))
        if s not in chosen:
            chosen.add(s)
            frontier += sorted(neighbours.get(s, set()) - chosen)
    cheap = sorted((s for s in score or {} if s not in chosen), key=lambda s: (tried[s], score[s]))
    chosen |= set(cheap[:size - len(chosen)])
    tried.update(chosen)
    return chosen


def improve(form: Formulation, values: list[float], seconds: float, score: dict[str, float] | None = None,
            backend: str = "ortools", progress=None, each_round=None) -> tuple[list[float], float]:
    """``values`` (a plan of ``form``) improved by fix-and-optimise over groups of datacenters for at most
    ``seconds``; the best plan and its ratio (goodput per USD/h). ``score``: datacenter → a cost per request
    (lower first; e.g. the LP's); ``progress(ratio)`` hears each better plan; ``each_round()`` is called before
    each group's MILP (a bound worked out beside the search is read there)."""
    deadline = time.monotonic() + seconds
    model = form.model
    values = list(values)
    lam = _ratio(form, values)
    sites = column_sites(form)
    rows_of = _rows_of(model)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for s, d in form.problem.links:
        neighbours[s].add(d)
        neighbours[d].add(s)
    saved = model.maximize, model.objective
    rng = random.Random(0)  # the same groups on every run: a plan reproducible by its time
    everywhere = len({key[1] for key in form.n})
    size, idle, tried = min(GROUP_SITES, everywhere), 0, Counter()
    try:
        while deadline - time.monotonic() > 1.0 and lam > 0:
            if each_round is not None:
                each_round()
            chosen = frozenset(group(form, values, score, size, neighbours, tried, rng))
            idle += 1
            used = sum(c > 1e-9 for c in site_costs(form, values)[0].values())
            if idle > ROUNDS_PER_SIZE * math.ceil(used / size):  # every used one tried at this size: larger groups
                if size >= everywhere:
                    break
                size, idle = min(2 * size, everywhere), 0
            free = [var for var, ds in sites.items() if ds <= chosen]
            model.maximize, model.objective = True, _f_objective(form, lam)
            rows = sorted({r for var in free for r in rows_of.get(var, ())})
            sub = sub_model(model, free, values, rows)
            hint = [values[var] for var in free]
            res = solve(sub, backend, min(STEP_S, deadline - time.monotonic()), hint=hint, mip_gap=1e-4,
                        restarts=False, sub_mips=True)
            if not res.status.has_solution:
                continue
            trial = list(values)
            for j, var in enumerate(free):
                trial[var] = float(round(res.values[j])) if model.vars[var].integer else res.values[j]
            better = _ratio(form, trial)
            # only the freed columns and their rows changed: the rest of the model holds as the plan did
            touched = LinearModel(vars=[model.vars[var] for var in free], rows=[model.rows[r] for r in rows])
            if better > lam * (1 + MIN_GAIN) and not touched.violations(trial):
                values, lam, idle = trial, better, 0
                if progress is not None:
                    progress(lam)
    finally:
        model.maximize, model.objective = saved
    return values, lam
