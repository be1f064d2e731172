"""When the time limit ends a later Dinkelbach MILP before it finds a plan, the solve still
returns the last plan found, marked feasible, with a finite gap from the LP bound."""

from __future__ import annotations

import math

import placer.ilp.dinkelbach as dinkelbach
from placer.ilp.backends import SolveResult, Status
from placer.ilp.formulation import build, pdd_architecture
from placer.optimize import SolveConfig


def test_a_timed_out_iteration_keeps_the_last_plan(micro_problem, monkeypatch):
    real = dinkelbach.solve
    milps = []

    def second_milp_times_out(model, *args, **kwargs):
        if any(v.integer for v in model.vars):
            milps.append(1)
            if len(milps) == 2:
                return SolveResult(Status.NO_SOLUTION, [], math.nan, math.nan, 1.0, "test")
        return real(model, *args, **kwargs)

    monkeypatch.setattr(dinkelbach, "solve", second_milp_times_out)
    form = build(micro_problem, pdd_architecture(micro_problem), "bcr")
    outcome = dinkelbach.solve_objective(form, SolveConfig(time_limit_s=30))
    assert outcome.status == "feasible" and outcome.values
    assert 0 <= outcome.mip_gap < math.inf and outcome.ratio > 0
    assert form.model.violations(outcome.values) == []
