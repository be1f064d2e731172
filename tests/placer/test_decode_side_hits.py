"""A trace scenario's crossing routes priced at what the far decoders hold (issue 42, rnd-7-4-trace: the line
carried 21.0 Gbit/s of 17.9 where the plan counted 15.2, because a conversation's earlier turns were decoded on
the other side): the planner routes the trace as the plan splits each class and re-solves at those hits."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from placer import decode_rounds
from placer.flows import Route
from placer.ilp.config import SolveConfig
from placer.ilp.formulation import build, pdd_architecture
from placer.pdd import P_MD
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.workload.decode_hits import with_held_hits

from .conftest import micro_dict


def _trace(path, conversations: int = 100) -> str:
    """Two-turn conversations: an 8192-token first prompt, then 16384 tokens whose first half is the first."""
    with open(path, "w") as f:
        for i in range(conversations):
            first = [100 * i + j for j in range(16)]
            second = first + [100 * i + 50 + j for j in range(16)]
            f.write(json.dumps({"timestamp": 2000 * i, "input_length": 8192, "output_length": 256,
                                "hash_ids": first}) + "\n")
            f.write(json.dumps({"timestamp": 2000 * i + 1000, "input_length": 16384, "output_length": 256,
                                "hash_ids": second}) + "\n")
    return str(path)


@pytest.fixture
def trace_problem(tmp_path):
    data = micro_dict(workload={"arrival_rps": 4.0, "trace": _trace(tmp_path / "t.jsonl")})
    data["options"] = dict(data["options"], drc=True)
    return resolve(parse_scenario(data))


def _classes(problem):
    cold, warm = sorted(problem.classes, key=lambda c: c.hit_rate)
    assert cold.hit_rate == 0.0 and warm.hit_rate == pytest.approx(0.5)
    return cold, warm


def _plan(routes):
    """What the rounds read of a plan: its routes; ``model_copy`` adds the note."""
    plan = SimpleNamespace(notes=[], routes=[SimpleNamespace(request_class=k, pipeline=P_MD, src=s, dst=d, rps=r)
                                             for k, s, d, r in routes])
    plan.model_copy = lambda update: SimpleNamespace(**{**vars(plan), **update})
    return plan


def test_a_crossing_class_is_priced_at_the_far_decoders_hit(trace_problem):
    """First turns decoded in dc-a, second turns across the line in dc-b: dc-b's decoders hold none of the
    second prompts, so their whole KV crosses (the MILP's link row and Route.wan_bytes), not the uncached
    half P's hit counts; a route into dc-a keeps P's hit."""
    cold, warm = _classes(trace_problem)
    split = _plan([(cold.name, "dc-a", "dc-a", 2.0), (warm.name, "dc-a", "dc-b", 2.0)])
    priced = with_held_hits(trace_problem, split)
    kv = trace_problem.kv_bytes_per_token
    assert priced.decode_hit(warm, "dc-b") == 0.0
    assert Route(priced, warm, P_MD, "dc-a", "dc-b", True).wan_bytes() == pytest.approx(16384 * kv)
    assert Route(priced, warm, P_MD, "dc-b", "dc-a", True).wan_bytes() == pytest.approx(0.5 * 16384 * kv)
    form = build(priced, pdd_architecture(priced), "bcr")
    row = next(r for r in form.model.rows if r.name == "link[dc-a->dc-b]")
    k = trace_problem.classes.index(warm)
    crossing = [var for f, var in form.x.items() if (f.k, f.pipeline, f.src, f.dst) == (k, P_MD, "dc-a", "dc-b")]
    assert crossing
    assert row.coeffs[crossing[0]] == pytest.approx(16384 * kv * 8 / 1e9)


def test_the_rounds_resolve_until_the_line_loads_settle(trace_problem):
    """Round 1 (P's hit) sends the second turns across; the trace routed so leaves dc-b holding none of them,
    the line's load doubles, so round 2 is solved at that hit; its plan keeps them home and the loads settle.
    The plan's note says how many solves and the line's Gbit/s before and after."""
    cold, warm = _classes(trace_problem)
    plans = [_plan([(cold.name, "dc-a", "dc-a", 2.0), (warm.name, "dc-a", "dc-b", 2.0)]),
             _plan([(cold.name, "dc-a", "dc-a", 2.0), (warm.name, "dc-a", "dc-a", 2.0)])]
    seen = []

    def solve(problem, config):
        seen.append(problem)
        return plans[len(seen) - 1], "form", "outcome"

    assert decode_rounds.wanted(trace_problem)
    (plan, form, outcome), problem, _ = decode_rounds.settle(trace_problem, solve, SolveConfig(time_limit_s=10.0),
                                                          lambda prob, p: p, first_hits=None)
    assert len(seen) == 2 and (form, outcome) == ("form", "outcome")
    assert seen[0].decode_hit(warm, "dc-b") == pytest.approx(0.5)  # round 1: P's hit
    assert seen[1].decode_hit(warm, "dc-b") == 0.0  # round 2: what round 1's routing left dc-b holding
    gbit = 2.0 * 16384 * trace_problem.kv_bytes_per_token * 8 / 1e9
    assert plan.notes[-1].startswith("decode-side hits")
    assert "2 solves" in plan.notes[-1]
    assert f"dc-a->dc-b {gbit / 2:.1f} Gbit/s as first priced, {gbit:.1f} at the far decoders' -> 0.0" in plan.notes[-1]
    assert problem.decode_hit(warm, "dc-a") == pytest.approx(0.5)


def _budget_taker(cold, warm):
    """(the problems solved, a solve that takes the budget and returns a plan sending ``warm`` across)."""
    crossing = _plan([(cold.name, "dc-a", "dc-a", 2.0), (warm.name, "dc-a", "dc-b", 2.0)])
    seen = []

    def solve(problem, config):
        seen.append(problem)
        time.sleep(max(0.0, config.left_s() - decode_rounds.MIN_RESOLVE_S + 0.2))
        return crossing, "form", "outcome"

    return seen, solve


def test_the_rounds_share_the_command_s_one_deadline(trace_problem):
    """--time-limit bounds the whole command: a first solve that leaves under MIN_RESOLVE_S of it gets no
    re-solve; its plan stands, priced at the hits its own routing leaves (the overloaded line shows in its
    figures), and the note says the time limit stopped the rounds."""
    cold, warm = _classes(trace_problem)
    seen, solve = _budget_taker(cold, warm)
    (plan, _, _), problem, config = decode_rounds.settle(trace_problem, solve, SolveConfig(time_limit_s=2.5),
                                                         lambda prob, p: p, first_hits=None)
    assert len(seen) == 1 and config.left_s() < decode_rounds.MIN_RESOLVE_S
    assert "1 solve (the time limit stopped the re-solves" in plan.notes[-1]
    assert problem.decode_hit(warm, "dc-b") == 0.0  # the plan's figures at what its routing leaves dc-b


def test_the_only_solve_is_priced_where_the_lp_routes(trace_problem):
    """rnd-7-19-trace: the MILP took the whole budget, so its one solve stood, priced at P's hit — dc1->dc2
    counted 11.9 Gbit/s of 14 where its routing left 23.6 (simulated 28), and 69 % of its requests were late.
    The first solve is priced at the hits the LP relaxation's own routing leaves: here it decodes both classes
    in dc-a, so dc-b holds nothing, and a plan that sends the second turns across counts their whole prompt
    — its line as first priced is what its routing leaves, with no re-solve to correct it."""
    cold, warm = _classes(trace_problem)
    seen, solve = _budget_taker(cold, warm)
    (plan, _, _), problem, _ = decode_rounds.settle(trace_problem, solve, SolveConfig(time_limit_s=8.0),
                                                    lambda prob, p: p)
    assert len(seen) == 1
    assert seen[0].decode_hit(warm, "dc-b") == 0.0  # was P's 0.5
    assert seen[0].decode_hit(warm, "dc-a") == pytest.approx(0.5)  # dc-a decoded the first turns
    gbit = 2.0 * 16384 * trace_problem.kv_bytes_per_token * 8 / 1e9
    assert f"dc-a->dc-b {gbit:.1f} Gbit/s as first priced, {gbit:.1f} at the far decoders'" in plan.notes[-1]


def test_drawn_classes_keep_p_hit(micro_problem):
    """A class-drawn scenario has no trace to route: no rounds, every route priced at P's hit as before."""
    assert micro_problem.trace is None and micro_problem.decode_hits == {}
    assert not decode_rounds.wanted(micro_problem)
    hot = micro_problem.classes[0]
    route = Route(micro_problem, hot, P_MD, "dc-a", "dc-b", True)
    assert route.wan_bytes() == (1.0 - hot.hit_rate) * hot.input_tokens * micro_problem.kv_bytes_per_token
