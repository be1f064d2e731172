"""The plan's RLD token share against the simulator's on relay-heavy cases (issue 42, part 6).

RLD holds a relayed request for its KV's WAN transfer and the handoff, and decodes a token per
step of the batch it actually holds (Little's law, the request itself included), not per step of
its design batch: at the design step the plan counted about half the simulator's tokens
(0.017 vs 0.038 on 10g-low-hit)."""

from __future__ import annotations

import pytest

from placer.flows import relay_stop_s
from placer.optimize import SolveConfig, optimize
from placer.pdd import CATCH_UP, ONE_SHOT
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict
from tests.placer.sim.test_relay_agreement import CASES


@pytest.mark.parametrize("name", ["10g-low-hit", "5g-low-hit"])
def test_rld_token_share_within_20_percent_of_the_simulator(name: str) -> None:
    problem = resolve(parse_scenario(small_pdd_dict(**CASES[name])))
    plan = optimize(problem, SolveConfig(marginals=False))
    sim = simulate(problem, plan, SimConfig(requests=30_000, seed=7))
    assert sim["rld_token_share"] > 0.01
    assert plan.metrics.rld_token_share == pytest.approx(sim["rld_token_share"], rel=0.20)


def test_relay_hold_runs_through_the_handoff() -> None:
    # one-shot: RLD decodes until MD's MainReady reaches it, one way after the KV lands
    assert relay_stop_s(0.4, 0.03, 0.02, ONE_SHOT) == pytest.approx(0.415)
    # catch-up with a round trip worth more than the final batch's tokens: every round runs
    assert relay_stop_s(0.4, 0.03, 0.002, CATCH_UP) == pytest.approx(0.4 + 0.015 + 3 * 0.03)
    assert relay_stop_s(float("inf"), 0.03, 0.02) == float("inf")


def test_a_relayed_request_whose_output_ends_before_its_kv_lands_leaves_rld_then() -> None:
    """RLD decodes a relayed request while its KV crosses; an output shorter than the transfer ends on RLD and
    the request leaves it there (the simulator's ``_ev_kv_at_md``: DONE before the KV lands). The plan held it
    for the transfer: rnd-7-13's 17-43-token relays over lines at 85 % planned RLD at batch 12.4 of 13 with a
    10.4-s KV wait, where the simulator's RLD held 0.8. A long output still holds through the transfer."""
    import dataclasses

    from placer.decode_state import _relay_hold_s
    from placer.flows import decode_design, instance
    from placer.pdd import P_RLD_MD, RLD

    problem = resolve(parse_scenario(small_pdd_dict(**CASES["10g-low-hit"])))
    plan = optimize(problem, SolveConfig(marginals=False))
    a = next(a for a in plan.assignments if a.role == RLD and a.pipeline == P_RLD_MD and a.rps > 0)
    im = instance(problem, a.key.chip, a.key.tp)
    step = decode_design(problem, im)[1]
    c = next(c for c in problem.classes if c.name == a.request_class)
    long_hold = _relay_hold_s(problem, plan, a, dataclasses.replace(c, output_tokens=100_000), {}, im)
    assert long_hold < 100_000 * step  # the transfer and the handoff end first: RLD holds it that long
    short = dataclasses.replace(c, output_tokens=max(1, int(0.25 * long_hold / step)))
    assert _relay_hold_s(problem, plan, a, short, {}, im) == pytest.approx(short.output_tokens * step)
