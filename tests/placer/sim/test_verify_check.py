"""optimize's default check (placer.sim.verify.check_plan_by_simulation): warnings a user would act on."""

from __future__ import annotations

import dataclasses

from placer.optimize import optimize
from placer.sim.config import SimConfig
from placer.sim.verify import check_plan_by_simulation

SIM = SimConfig(requests=3000)


def test_a_promise_the_simulation_does_not_keep_is_warned(micro_problem):
    plan = optimize(micro_problem)
    honest = check_plan_by_simulation(micro_problem, plan, SIM)
    assert honest.sla_met and not [w for w in honest.warnings if "TTFT P90" in w]
    promised = plan.metrics.model_copy(update={"ttft_p90_s": honest.ttft_p90_s / 2})  # a plan that over-promises
    bragging = check_plan_by_simulation(micro_problem, plan.model_copy(update={"metrics": promised}), SIM)
    assert any(w.startswith("simulated TTFT P90") and "+100 %" in w for w in bragging.warnings)


def test_a_simulation_that_misses_the_sla_is_warned(micro_problem):
    plan = optimize(micro_problem)
    strict = dataclasses.replace(micro_problem, ttft_p90_s=0.05)  # far below any prefill of 16K tokens
    check = check_plan_by_simulation(strict, plan, SIM)
    assert not check.sla_met
    assert check.warnings[0].startswith("the simulation misses the SLA")
