"""A decode pool's slot row by the classes it serves (issue 42, rnd-7-5): the MILP's (C6) charged every decode token
the step at the scenario's mean context, so a pool given the long-context classes was planned at the mix's batch and
stepped past the TPOT (rnd-7-5: two Gaudi3 pools at 7,300 tokens/s each, their context 5,700 against the mix's 4,100;
the evaluation found them overloaded, the simulator's queues grew once a run outlived the decoders' fill).
:func:`placer.decode_slots.context_slot_weight` counts a held request by what it adds to the step (a class decoding
its whole output: mean context I + O/2)."""

from __future__ import annotations

import pytest

from placer.decode_slots import context_slot_weight
from placer.flows import decode_context_tokens, decode_design, instance
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict

MIXED = micro_dict(workload={"arrival_rps": 6.0, "classes": [
    {"name": "chat", "share": 0.7, "input_tokens": 1000, "output_tokens": 800, "hit_rate": 0.2},
    {"name": "agent", "share": 0.3, "input_tokens": 50000, "output_tokens": 60, "hit_rate": 0.9}]},
    sla={"ttft_p90_s": 4.0, "tpot_s": 0.03})


def test_a_pool_of_long_context_classes_holds_fewer_requests_within_the_tpot():
    problem = resolve(parse_scenario(MIXED))
    im = instance(problem, "H100-SXM", 2)
    batch, step = decode_design(problem, im)
    x = decode_context_tokens(problem.classes)
    chat, agent = problem.classes
    weights = {c.name: context_slot_weight(im, batch, x, c.input_tokens + c.output_tokens / 2) for c in problem.classes}
    # the mix is what the design is made at: one mix request counts 1 (time-weighted, share × output)
    held = {c.name: c.share * c.output_tokens for c in problem.classes}
    assert sum(held[n] * w for n, w in weights.items()) / sum(held.values()) == pytest.approx(1.0, abs=0.02)
    assert weights["agent"] > 3.0 > 1.0 > weights["chat"]
    u = problem.options.utilization_cap
    long_ctx = agent.input_tokens + agent.output_tokens / 2
    # the mix's row lets a pool of agents hold u·B: its step misses the TPOT
    assert im.step_s(u * batch, long_ctx) > 1.5 * problem.tpot_s
    # by the weights it holds u·B / w: the step the mix has at u·B, within the TPOT
    assert im.step_s(u * batch / weights["agent"], long_ctx) == pytest.approx(im.step_s(u * batch, x), rel=0.05)
    assert im.step_s(u * batch / weights["agent"], long_ctx) <= problem.tpot_s


def _most_held(form, q, var) -> float:
    """Requests of the z column ``var`` one instance of pool ``q`` may hold under its (C6) rows: the fewest
    req/s any row lets one instance take (its limit over the column's coefficient) × the seconds each
    request is held (the count row's coefficient)."""
    n = form.n[q.key]
    rows = [r for r in form.model.rows if r.family == "decode_slots" and var in r.coeffs and n in r.coeffs]
    busy = next(r.coeffs[var] for r in rows if r.name.startswith("decode_slots["))
    return min(-r.coeffs[n] / r.coeffs[var] for r in rows) * busy


def test_the_milp_lets_a_pool_of_long_context_requests_hold_only_what_steps_within_the_tpot():
    """(C6)'s step row: a decode pool given only the long-context class (agents, 50k-token prompts) may hold
    the requests whose step meets the TPOT, not the mix's u·B (which steps at 1.5× the TPOT); one given only
    the short class stays at u·B (the count row: the design batch is also the engine's and the KV's)."""
    from placer.ilp.formulation import build, pdd_architecture

    problem = resolve(parse_scenario(MIXED))
    form = build(problem, pdd_architecture(problem))
    u, checked = problem.options.utilization_cap, 0
    for (k, pipe, _, q), var in form.z.items():
        if pipe is not None or q.chip != "H100-SXM":  # one agent alone steps past the TPOT on an L40S
            continue
        c, design = problem.classes[k], form.decode[q]
        held = _most_held(form, q, var)
        if c.name == "agent":
            assert design.im.step_s(held, c.input_tokens + c.output_tokens / 2) <= problem.tpot_s
            assert held < 0.5 * u * design.batch
        else:
            assert held == pytest.approx(u * design.batch, rel=1e-6)
        checked += 1
    assert checked >= 2


def test_validate_flags_a_decode_pool_whose_long_context_requests_step_past_the_tpot():
    """`validate` checks the step row too: a pool holding only agents within the count row (its design batch
    at the mix) but at a step past the TPOT is named; the same req/s of the short class passes."""
    from placer.flows import decode_design
    from placer.optimize import SolveConfig, optimize
    from placer.validate import validate

    problem = resolve(parse_scenario(MIXED))
    plan = optimize(problem, SolveConfig(marginals=False))
    pool = next(p for p in plan.pools if p.role == "MD" and p.count > 0)
    im = instance(problem, pool.chip, pool.tp)
    batch, step = decode_design(problem, im)
    chat, agent = problem.classes
    u = problem.options.utilization_cap

    def with_decode(c) -> list[str]:
        rps = 0.95 * u * batch * pool.count / (c.output_tokens * step)  # 95 % of the count row
        rows = [a for a in plan.assignments if a.role == "P"]
        rows.append(rows[0].model_copy(update={"request_class": c.name, "role": "MD", "pipeline": None, "queue": None,
                                               "queue_instances": None, "datacenter": pool.datacenter,
                                               "chip": pool.chip, "tp": pool.tp, "rps": rps}))
        return validate(problem, plan.model_copy(update={"assignments": rows}))

    assert any("to step within" in issue for issue in with_decode(agent))
    assert not any("to step within" in issue or "batch slots" in issue for issue in with_decode(chat))
