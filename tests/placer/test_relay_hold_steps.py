"""The evaluation's relay hold and the MILP's read the same expression: RLD holds a relayed request for the
tokens it streams before the handoff, :func:`placer.flows.eager_tokens` (one a design step, at least t0, at most the
output), × the step — a whole number of steps, as ``placer.ilp.decode_rows._split_relay`` charges the relay's busy
seconds. Before, the evaluation capped the transfer and handoff at output × step itself, between two steps."""

from __future__ import annotations

import math

import pytest

from placer.decode_state import _relay_hold_s
from placer.flows import Route, decode_design, eager_tokens, instance, relay_stop_s
from placer.optimize import SolveConfig, optimize
from placer.pdd import P_RLD_MD, RLD
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict
from tests.placer.sim.test_relay_agreement import CASES


@pytest.mark.parametrize("name", ["10g-low-hit", "5g-low-hit"])
def test_the_relay_hold_is_the_milps_whole_steps(name: str) -> None:
    problem = resolve(parse_scenario(small_pdd_dict(**CASES[name])))
    plan = optimize(problem, SolveConfig(marginals=False))
    classes = {c.name: c for c in problem.classes}
    relays = [a for a in plan.assignments if a.role == RLD and a.pipeline == P_RLD_MD and a.rps > 0]
    assert relays
    for a in relays:
        c, im = classes[a.request_class], instance(problem, a.key.chip, a.key.tp)
        step = decode_design(problem, im)[1]
        wan = Route(problem, c, P_RLD_MD, a.datacenter, a.dst, problem.options.drc).wan_s(0.0)
        link = problem.links.get((a.datacenter, a.dst))
        stop = relay_stop_s(wan, link.rtt_s if link else 0.0, step, plan.handoff.mode,
                            plan.handoff.catch_up_threshold_tokens)
        hold = _relay_hold_s(problem, plan, a, c, {}, im)
        assert hold == pytest.approx(eager_tokens(stop, c.output_tokens, step) * step)
        tokens = hold / step
        assert tokens == pytest.approx(round(tokens)) and 1 <= round(tokens) <= c.output_tokens
        # the rounding: at most one step past the old cap, never below it
        old = min(stop, c.output_tokens * step)
        assert old - 1e-12 <= hold < old + step or math.isclose(hold, step)
