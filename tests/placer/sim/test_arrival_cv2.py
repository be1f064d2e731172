"""Arrivals that are not Poisson (workload.arrival_cv2, issue 48): the simulator draws them, the
evaluation's G/G/1 law predicts what it measures, and the MILP plans for them."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from placer.errors import InputError
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.sim.verify import agreement
from placer.specs import parse_scenario
from placer.workload.arrivals import poisson_arrivals, renewal_arrivals
from placer.workload.synthetic import class_requests


def _one_queue(arrival_cv2: float = 1.0, ttft_p90_s: float = 2.0) -> dict:
    """One datacenter, one class of 8K-token prompts with no cache hits: TTFT is the P queue's wait plus
    a prefill, so the arrivals' variability is what moves its P90."""
    return {"name": "one-queue", "model": "llama-3.1-8b", "kv_dtype": "bf16",
            "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 8}}],
            "workload": {"arrival_rps": 6.0, "arrival_cv2": arrival_cv2, "classes": [
                {"name": "c", "share": 1.0, "input_tokens": 8192, "output_tokens": 64, "hit_rate": 0.0}]},
            "sla": {"ttft_p90_s": ttft_p90_s, "tpot_s": 0.05}, "options": {"tp_degrees": [1]}}


@pytest.fixture(scope="module")
def poisson_planned():
    problem = resolve(parse_scenario(_one_queue()))
    return problem, optimize(problem, SolveConfig(marginals=False))


@pytest.mark.parametrize("cv2", [0.5, 2.0])
def test_the_simulated_p_queue_under_arrival_cv2_matches_the_evaluations_law(poisson_planned, cv2, seed):
    problem, plan = poisson_planned
    poisson = simulate(problem, plan, SimConfig(requests=40_000, seed=seed))
    shaped = dataclasses.replace(problem, arrival_cv2=cv2)
    sim = simulate(shaped, plan, SimConfig(requests=40_000, seed=seed))
    a = agreement(shaped, plan, sim)
    # the same plan's P90 moves by a quarter to a third (0.79 / 1.05 / 1.44 s at cv2 0.5 / 1 / 2);
    # the evaluation follows it within 4 % (seed 7; tolerance 10 %)
    assert abs(sim["ttft_p90_s"] / poisson["ttft_p90_s"] - 1) > 0.15
    assert abs(a["ttft_p90_error"]) <= 0.10, a


def test_cv2_one_is_the_poisson_stream_draw_for_draw():
    renewal = renewal_arrivals(3.0, random.Random(11), 1.0)
    poisson = poisson_arrivals(3.0, random.Random(11))
    assert list(itertools.islice(renewal, 500)) == list(itertools.islice(poisson, 500))

    class Served:
        share, input_tokens, output_tokens, hit_rate = 1.0, 100, 10, 0.5

    default = class_requests([Served()], 3.0, random.Random(4))
    unit = class_requests([Served()], 3.0, random.Random(4), arrival_cv2=1.0)
    assert list(itertools.islice(default, 200)) == list(itertools.islice(unit, 200))


def test_bursty_arrivals_and_an_arrival_cv2_are_refused_together(poisson_planned):
    problem, plan = poisson_planned
    with pytest.raises(InputError, match="arrival_cv2"):
        simulate(dataclasses.replace(problem, arrival_cv2=2.0), plan, SimConfig(requests=100, arrivals="bursty"))


def test_the_milp_plans_fewer_prefill_instances_for_a_regular_stream():
    def p_instances(cv2: float) -> int:
        plan = optimize(resolve(parse_scenario(_one_queue(cv2, ttft_p90_s=1.0))), SolveConfig(marginals=False))
        return sum(p.count for p in plan.pools if p.role == "P")

    # Poisson needs 3 P instances for a 1 s TTFT P90 at 6 req/s; arrivals half as variable fit on 2
    # (the evaluation: P90 0.81 s; simulated 0.79 s)
    assert p_instances(0.5) < p_instances(1.0)
