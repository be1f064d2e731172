"""A plan first at fleet scale: the same problem without its WAN lines, rounded, before the whole model exists.

in:  a :class:`~placer.problem.Problem` with many sites and classes, its :class:`~placer.ilp.data.Architecture`,
     the solve's started :class:`~placer.ilp.config.SolveConfig`
out: :func:`local_plan`: the formulation of the problem without lines (every KV move by RDMA inside its
     datacenter) and a plan of it (:class:`LocalPlan`: its LP rounded — or, where that rounds to no plan, the
     local Dinkelbach's own seed — improved by Dinkelbach on the local model, then by fix-and-optimise over
     groups of datacenters (:mod:`placer.ilp.improve`) in what is left of its share) — or None when it has none
     in its share of the time;
     :func:`worth_it`: whether a problem is large enough for it.

Why: at 100 sites × 12 classes the whole model (287 000 columns, 1.5 M non-zeros) takes 20-55 s to build on
2 shared cores and its LP relaxation more than 30 s, so its rounded LP (:mod:`placer.ilp.rounding`) could not
give a plan within 30 s. Dropping the lines leaves every pool and queue (pools, tiers and prices do not depend
on the lines) but only the flows that stay in their datacenter: about a tenth of the columns, so its build,
its LP and its rounding take seconds.

Why a plan of it is a plan of the whole problem: the lines only add flows (columns) and the link rows (C8)
that count them. Every other row of the whole model holds the same coefficients on the columns both models
share — P and decode capacities, mix, demand, SLA, inventory, power — and a P queue's memory row (C4), where
the whole model keeps it, is implied for the local flows by their (C3) (each local flow passed that test:
:func:`placer.ilp.columns.implied`). So the local plan, by variable name with every other column at 0, breaks
no row of the whole model; :func:`placer.ilp.starts._feasible_start` checks it anyway before Dinkelbach starts
from it from below. Its ratio is a lower bound only: the certified gap comes from the whole model's LP
relaxation and MILP bounds.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

from placer.errors import PlacerError, SolveTimeoutError
from placer.ilp.config import SolveConfig, building_within
from placer.ilp.data import Architecture
from placer.ilp.dinkelbach import solve_objective
from placer.ilp.formulation import Formulation, build
from placer.ilp.improve import improve, site_costs
from placer.ilp.outcome import search_backend
from placer.ilp.starts import ROUNDING_BACKEND, _lp_ratio_bound, _report, _rounded_start, capacity_bound
from placer.problem import Problem, without_lines

#: Problems with at least this many (sites × classes), and lines, get a local plan first: 100 × 12 = 1200
#: (the whole model: no plan within 30 s without it); 16 × 12 = 192 and the bundled sixteen-dc (16 × 8)
#: get their first plan from the restricted seed MILP in seconds, as before.
LOCAL_FIRST_SITE_CLASSES = 600
#: Share of the time left that the local model's build, LP, rounding and Dinkelbach may take together.
LOCAL_SHARE = 0.4
#: ... but at least LOCAL_MIN_S (within LOCAL_FLOOR_SHARE of what is left): under a short limit (30 s) the
#: whole model cannot even be built (100 sites × 12 classes: 20-55 s), so the local plan is the answer.
LOCAL_MIN_S = 45.0
LOCAL_FLOOR_SHARE = 0.8
#: Seconds of that share left after the rounding below which neither its search nor its Dinkelbach starts.
IMPROVE_MIN_S = 5.0
#: Share of what is left after the rounding that the local model's Dinkelbach takes; the search by groups of
#: datacenters (:mod:`placer.ilp.improve`) takes the rest where it has not proven its plan optimal.
DINKELBACH_SHARE = 0.4
#: The local Dinkelbach's certified gap above which the search runs: proven within TARGET_GAP (1 %) is not optimal.
#: 100 sites × 12 classes at 300 s: its Dinkelbach proved 240.73 req/USD within 1 % at 41 s, and the search had been
#: skipped; run, it found 242.15 by 110 s (the whole model's search from 240.73 reached 241.60 at 300 s, from 242.15
#: 243.40). Below this the plan is optimal to the sub-MILPs' own gap (improve's mip_gap).
SEARCHED_GAP = 1e-4


@dataclass
class LocalPlan:
    """The local model and its plan: ``values`` by variable index, ``by_name`` for the whole model."""

    form: Formulation
    values: list[float]
    ratio: float  # SLA goodput per USD/h of the plan
    ceiling: float | None = None  # capacity_bound of the whole problem (same pools), None when not derived
    backend: str = ROUNDING_BACKEND  # where the plan came from: the rounding, or the MILPs that improved or seeded it

    @property
    def by_name(self) -> dict[str, float]:
        return {v.name: x for v, x in zip(self.form.model.vars, self.values) if x != 0.0}


def worth_it(problem: Problem) -> bool:
    """Whether ``problem`` is large enough that its whole model cannot give a plan in seconds."""
    return bool(problem.links) and len(problem.datacenters) * len(problem.classes) >= LOCAL_FIRST_SITE_CLASSES


def local_plan(problem: Problem, arch: Architecture, config: SolveConfig, began: float) -> LocalPlan | None:
    """The plan of ``problem`` without its lines: the local model built, its LP relaxation's least-cost
    solution rounded (:mod:`placer.ilp.rounding`), within :data:`LOCAL_SHARE` (at least :data:`LOCAL_MIN_S`) of
    what is left of ``config`` (started by the caller); None when it gives no plan in that time.
    ``config.progress`` hears it as the "first plan" with :func:`~placer.ilp.starts.capacity_bound`'s ceiling
    (the local model's pools, queues and designs are the whole model's, so it holds for the whole problem; its
    LP bound would not)."""
    left = config.left_s()
    seconds = max(LOCAL_SHARE * left, min(LOCAL_FLOOR_SHARE * left, LOCAL_MIN_S))
    share = dataclasses.replace(config, deadline=time.monotonic() + seconds, progress=None)
    local = without_lines(problem)
    try:
        with building_within(share):  # no (C19): this LP is rounded, and from theirs 100 x 12 rounded to no plan
            form = build(local, arch, "bcr", local_decoders=False)
        bound, _, cheapest = _lp_ratio_bound(form, share)
        if bound is None or not cheapest:
            return None
        first = _rounded_start(form, share, cheapest, None, began, share=1.0)
    except SolveTimeoutError:
        return None
    ceiling = capacity_bound(form)  # the local model's pools are the whole model's
    if first is not None:
        _report(config, "first plan", first.lam, ceiling, began)
        dinkelbach = dataclasses.replace(share, deadline=time.monotonic() + DINKELBACH_SHARE * share.left_s())
        values, ratio, gap = _improved(form, dinkelbach, first.hint, first.lam, ceiling, config, began)
    else:  # the rounding found none (rare since its dive opens sites beyond the LP's): the local Dinkelbach seeds itself
        values, ratio, gap = _improved(form, share, None, 0.0, ceiling, config, began)
        if values is None:
            return None
    if gap > SEARCHED_GAP:  # proven within TARGET_GAP is not proven optimal: the search still finds more there
        values, ratio = _searched(form, share, values, ratio, cheapest, ceiling, config, began)
    rounded = first is not None and ratio <= first.lam
    return LocalPlan(form, values, ratio, ceiling,
                     ROUNDING_BACKEND if rounded else search_backend(config.backend))


def _searched(form: Formulation, share: SolveConfig, values: list[float], ratio: float, cheapest: list[float],
              ceiling: float | None, config: SolveConfig, began: float) -> tuple[list[float], float]:
    """The local Dinkelbach's plan improved by fix-and-optimise over groups of datacenters
    (:mod:`placer.ilp.improve`, the LP's cost per request as their score) in what is left of ``share``.
    Each better plan reaches ``config.progress`` as a "local milp" with the capacity ceiling."""
    seconds = share.left_s()
    if seconds < IMPROVE_MIN_S:
        return values, ratio
    cost, good = site_costs(form, cheapest)
    score = {dc: cost[dc] / good[dc] for dc in cost if cost[dc] > 0 and good[dc] > 0}

    def relay(better: float) -> None:
        _report(config, "local milp", better, ceiling, began)

    return improve(form, values, seconds, score, share.backend, progress=relay)


def _improved(form: Formulation, share: SolveConfig, values: list[float] | None, ratio: float,
              ceiling: float | None, config: SolveConfig, began: float) -> tuple[list[float] | None, float, float]:
    """Dinkelbach on the local model from its rounded plan, in what is left of ``share``: the rounding
    loses much at scale (100 sites × 12 classes: 195 SLA requests per USD rounded, 236 after ~40 s of
    local MILPs, against the local LP's 287). Its better plans reach ``config.progress`` with the capacity
    ceiling only: the local model's own bounds are not bounds of the whole problem. Also the gap it certified on
    the local model (inf where it has none). ``values`` None: no rounded plan, so Dinkelbach starts from its own
    seed, and its first plan is the "first plan" (None, when it has none)."""
    if values is not None and share.left_s() < IMPROVE_MIN_S:
        return values, ratio, math.inf
    best = [None if values is None else ratio]  # the best plan reported so far (each is reported once)

    def relay(progress) -> None:
        if progress.incumbent is not None and (best[0] is None or progress.incumbent / 3600 > best[0]):
            _report(config, "first plan" if best[0] is None else "local milp", progress.incumbent / 3600, ceiling,
                    began)
            best[0] = progress.incumbent / 3600

    start = None if values is None else {v.name: x for v, x in zip(form.model.vars, values) if x != 0.0}
    try:
        better = solve_objective(form, dataclasses.replace(share, progress=relay), feasible_start=start)
    except PlacerError:
        return values, ratio, math.inf
    if better.ratio > ratio and not form.model.violations(better.values):
        return better.values, better.ratio, better.mip_gap
    return values, ratio, better.mip_gap
