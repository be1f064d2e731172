"""A plan in hand on a model beyond proof: the time left goes to the search, the LP's bound is worked out beside it.

in:  a built :class:`~placer.ilp.formulation.Formulation` too large for its proving MILP
     (:data:`placer.ilp.round_settings.PROOF_NONZEROS`), the seed plan of :func:`placer.ilp.dinkelbach.solve_objective`,
     the capacity ceiling and least cost
out: :func:`searched_only` — the best plan the search finds, its gap against the least bound (:class:`Outcome`)
"""

from __future__ import annotations

import math
import time

from placer.ilp.config import SolveConfig
from placer.ilp.formulation import Formulation
from placer.ilp.improve import improve
from placer.ilp.lp_ratio import CeilingBeside
from placer.ilp.outcome import Outcome, search_backend
from placer.ilp.round_settings import LP_RATIO_SHARE, TARGET_GAP
from placer.ilp.starts import _Dinkelbach, _goodput_floor, _report


def searched_only(form: Formulation, config: SolveConfig, seed: _Dinkelbach, upper: float | None,
                  least_cost: float, began: float, nonzeros: int) -> Outcome:
    """A plan in hand on a model beyond proof (its proving MILP, with the rows its rounds add, of ``nonzeros`` at
    least :data:`~placer.ilp.round_settings.PROOF_NONZEROS`): the time left goes to the search by groups of
    datacenters on the whole model (:func:`placer.ilp.improve.improve`: its lines' flows are free columns there, where
    the local plan had none), each better plan reported as a "search", and beside it (a forked child; where none can
    be, first, within :data:`~placer.ilp.round_settings.LP_RATIO_SHARE` of the time) to the LP relaxation's ratio
    bound (:class:`placer.ilp.lp_ratio.CeilingBeside`), each lower ceiling reported as an "lp bound" when read; ``upper`` and ``least_cost`` the capacity ceiling's. The
    gap is against the least bound, and a note on the plan says so.
    No MILP on the whole model: its presolve alone would outlive the limit (100 sites × 12 classes: 240.73 -> 241.60 by
    the search in 150 s, where the proving round ended at its limit with nothing), or its rounds end at the LP's bound
    (64 × 12 at 300 s: 10.6 % and 369.9 req/USD by its proving round, 5.6 % and 387.5 this way)."""
    best = seed.lam

    def lowered(ceiling: float) -> None:  # each ceiling under the least so far (the capacity ceiling first)
        _report(config, "lp bound", best, ceiling, began)

    _report(config, "lp bound", seed.lam, upper, began)  # the capacity ceiling, until the LP's best ratio lowers it
    lp = CeilingBeside(form, seed.lam, least_cost, _goodput_floor(form), config.left_s(), lowered, LP_RATIO_SHARE,
                       upper)

    def relay(ratio: float) -> None:
        nonlocal best
        best = ratio
        lp.read()
        _report(config, "search", ratio, lp.best, began)

    values, ratio = improve(form, seed.hint, config.left_s(), backend=config.backend, progress=relay,
                            each_round=lp.read)
    upper = lp.finish(max(0.0, config.left_s()))  # a search that ended early waits for the LP's last ceiling
    form.notes.append(f"the whole model ({nonzeros / 1e6:.2f} M non-zeros) is too large to prove: its gap is measured "
                      "against the LP relaxation's best ratio, which a longer --time-limit does not lower; the time "
                      "went to the search by groups of datacenters, that bound worked out beside it")
    gap = max(0.0, (upper - ratio) / ratio) if upper and ratio > 0 else math.inf
    backend = seed.res.backend if ratio <= seed.lam else search_backend(config.backend)
    return Outcome(values, "optimal" if gap <= TARGET_GAP + 1e-12 else "feasible", gap, time.perf_counter() - began,
                   backend, seed.iterations, ratio)
