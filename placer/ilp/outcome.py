"""What a solve of the objective returns, and the name of the solver its plan came from.

in:  nothing (the record :func:`placer.ilp.dinkelbach.solve_objective` and its helpers fill)
out: :class:`Outcome` — the solver's values, status, certified gap, seconds, backend, iterations and ratio;
     :func:`search_backend` — the backend a searched plan (:mod:`placer.ilp.improve`'s sub-MILPs) carries
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outcome:
    values: list[float]
    status: str
    mip_gap: float
    seconds: float
    backend: str
    iterations: int
    ratio: float  # goodput per USD/h at the optimum (bcr objective), else nan


#: The solver that a search's plans come from (its sub-MILPs), by the backend asked for.
SEARCH_BACKENDS = {"pulp": "pulp-cbc", "ortools-scip": "ortools-scip"}


def search_backend(backend: str) -> str:
    """The name a plan from :func:`placer.ilp.improve.improve`'s sub-MILPs (or a Dinkelbach's) carries, for ``backend``."""
    return SEARCH_BACKENDS.get(backend, "ortools-highs")
