"""Solver settings: one object that a face builds once and the library passes down whole.

in:  what the user chose (objective, backend, time limit, marginals)
out: :class:`SolveConfig`, read by `optimize`, `evaluate_plan`, the baselines, the
     Dinkelbach loop, `--verify` and the sweeps instead of loose keyword arguments.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from placer.errors import InputError

#: Objectives a user may ask for; the baselines also use "max-served" internally.
OBJECTIVES = ("bcr", "min-cost", "max-goodput")


@dataclass(frozen=True)
class SolveConfig:
    """How to solve: what to optimise, with which MILP backend, in how long."""

    objective: str = "bcr"  # bcr | min-cost | max-goodput (max-served: baselines only)
    backend: str = "ortools"  # ortools (HiGHS) | ortools-highs | ortools-scip | pulp
    time_limit_s: float = 30.0
    marginals: bool = True  # re-solve to price each binding row (bcr only)

    def check(self) -> SolveConfig:
        """Raise InputError naming the bad setting; return self."""
        if self.objective not in OBJECTIVES:
            raise InputError(f"objective: unknown {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        if not (self.time_limit_s > 0 and math.isfinite(self.time_limit_s)):
            raise InputError(f"time-limit must be a positive number of seconds, got {self.time_limit_s}")
        return self

    def but(self, **changes) -> SolveConfig:
        """A copy with ``changes`` (e.g. ``config.but(objective="min-cost", marginals=False)``)."""
        return dataclasses.replace(self, **changes)
