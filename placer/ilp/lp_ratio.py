"""The LP relaxation's bound on the ratio itself: Dinkelbach's iterations on the LP (issue 47).

in:  a built :class:`~placer.ilp.formulation.Formulation` with its decode covers (C18) and local decoder rows (C19)
     still aside, a plan's ratio λ0 (goodput per USD/h), lower bounds on any plan's cost and goodput, a time budget
out: :func:`lp_ratio_ceiling` — the highest goodput per USD/h any plan may have, as the LP relaxation proves it;
     None when no LP ends in time; :class:`CeilingBeside` — the same worked out beside the caller's search

Why: the ratio bound from the least-cost LP (:func:`placer.ilp.starts._lp_ratio_bound`) is G's upper bound over the
least cost, which counts every served request as on time — and the least-cost LP spends (C11)'s whole 10 % of late
requests, so that bound sits about 10 % above what the LP itself allows. Where a MILP proves the ratio its bound on
F(λ) = max goodput − λ·cost replaces it; a fleet beyond proof (:func:`placer.ilp.beyond_proof.searched_only`) had only
it. Here the LP relaxation of F(λ), with (C18) and (C19), is solved at λ0, then at its solution's own ratio, until
that ratio stops rising (Dinkelbach's iterations, which converge to the LP's best ratio λ_LP from below: for every
plan x, goodput(x) − λ·cost(x) ≤ F_LP(λ)); each F_LP(λ) gives the ceiling of :func:`placer.ilp.starts._ceiling`, the
least of them the bound. 100 sites × 12 classes (``bench/scale_scenarios.py``) from its plan at 243.28 req/USD:
F_LP = 49.96 req/s, ceiling 261.88 (34 s); at the LP's ratio 261.29, F_LP = 0.011, ceiling 261.29 (33 s) — against
the least-cost bound's 279.19 (37 s). 16 × 12: 304.56 against 322.07, where the proven optimum is 283.56.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from placer.ilp import guard
from placer.ilp.backends import solve
from placer.ilp.formulation import Formulation
from placer.ilp.starts import _ceiling, _cost, _f_objective, _goodput

#: LPs at most (100 × 12 stops after two: the first's solution is already at the LP's best ratio)
ROUNDS = 4
#: the iterations end once the ceiling is within this (relative) of the last LP solution's ratio: no later LP can
#: bring it below that ratio, a lower bound on the LP's best (on 100 × 12 a third LP, 32 s, moved it 2·10⁻⁶)
CONVERGED = 1e-4


def lp_ratio_ceiling(form: Formulation, lam: float, least_cost: float, floor: float,
                     left_s: Callable[[], float], progress: Callable[[float], None] | None = None) -> float | None:
    """The least ceiling (goodput per USD/h) the LP relaxations of F(λ), with (C18) and (C19), give from ``lam`` on
    (the module's docstring); ``least_cost`` (USD/h) and ``floor`` (req/s) bound any plan's cost and goodput from
    below; ``left_s()`` the seconds each LP may still take; ``progress(ceiling)`` hears each. None when the first LP
    gives no solution in time."""
    m = form.model.relaxed()
    m.rows.extend(form.covers + form.local)
    m.maximize = True
    best = None
    for _ in range(ROUNDS):
        left = left_s()
        if left <= 0:
            break
        m.objective = _f_objective(form, lam)
        res = solve(m, "ortools", left)
        if not res.status.has_solution:
            break
        best = min(best or math.inf, _ceiling(lam, res.objective, least_cost, floor))
        if progress is not None:
            progress(best)
        cost = _cost(form, res.values)
        if cost <= 0:
            break
        ratio = _goodput(form, res.values) / cost
        if ratio <= lam or best <= ratio * (1 + CONVERGED):
            break
        lam = ratio
    return best


def _in_child(report: Callable[[float], None], form: Formulation, lam: float, least_cost: float, floor: float,
              deadline: float) -> None:
    lp_ratio_ceiling(form, lam, least_cost, floor, lambda: deadline - time.monotonic(), report)


class CeilingBeside:
    """:func:`lp_ratio_ceiling` beside the caller's search: in a forked child (:class:`placer.ilp.guard.Beside`) with
    all of ``seconds``, where a child can be forked; else first, within ``share`` of them. ``best`` is the least ceiling
    so far, from ``upper`` (a bound known already, e.g. the capacity ceiling; None: none yet); each lower one reaches
    ``progress`` when read (:meth:`read`, between the search's rounds; :meth:`finish` at its end).

    Why beside: a search and an LP each keep one core busy, and HiGHS's interior-point LP cannot be shared out. On
    100 sites × 12 classes the two LPs took 66 s of the search's time on 2 cores (twenty-seventh session), and on a
    VM ~2.4× slower neither ended within LP_RATIO_SHARE, so the gap stood at the capacity ceiling's 34 %."""

    def __init__(self, form: Formulation, lam: float, least_cost: float, floor: float, seconds: float,
                 progress: Callable[[float], None], share: float, upper: float | None = None) -> None:
        self.best = upper
        self._progress = progress
        self._child = None
        if guard.can_fork():
            self._child = guard.Beside(_in_child, form, lam, least_cost, floor, time.monotonic() + seconds)
        else:
            ends = time.monotonic() + share * seconds
            lp_ratio_ceiling(form, lam, least_cost, floor, lambda: ends - time.monotonic(), self._hear)

    def _hear(self, ceiling: float) -> None:
        """A ceiling the LP reported: kept and heard when under the least so far (one heard before never is)."""
        if self.best is None or ceiling < self.best:
            self.best = ceiling
            self._progress(ceiling)

    def _take(self, values: list) -> None:
        for ceiling in values:
            self._hear(ceiling)

    def read(self) -> None:
        """The ceilings the child has reported since the last read, without waiting."""
        if self._child is not None:
            self._take(self._child.poll())

    def finish(self, wait_s: float) -> float | None:
        """The least ceiling, waiting at most ``wait_s`` for the child's last LP; the child is then ended."""
        if self._child is not None:
            self._take(self._child.finish(wait_s))
            self._child = None
        return self.best
