"""A plan's P queues are settled once per problem: its figures, its check and its "why" share the fixed points.

After the solve, ``placer optimize`` works out the plan's figures (:func:`placer.optimize.with_metrics`), checks
it (:func:`placer.validate.validate`) and, in the table view, says why it looks as it does
(:func:`placer.report.why.explain`). Each asks every P queue's law; on a 40-datacenter mesh each pass took ~4 s,
and all three ran after ``--time-limit`` (stop 62's CI: 18.4 s with a 4-s limit). The settled queues are kept on the
problem's instance models (:func:`placer.flows.instance`, :func:`placer.packed_queue.packed_queue`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import placer.packed_queue as packed_queue_module
from placer.flows import instance
from placer.ilp.config import SolveConfig
from placer.optimize import as_problem, optimize, with_metrics
from placer.packed_queue import packed_queue
from placer.problem import resolve, without_lines
from placer.report.why import explain
from placer.specs import load_scenario, parse_scenario
from placer.validate import validate
from tests.placer.sim.conftest import small_pdd_dict

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pdd-two-dc.yaml"


@pytest.fixture
def settles(monkeypatch) -> list[int]:
    """Counts the P queues worked out from scratch (the fixed point of :mod:`placer.packed_queue`)."""
    count = [0]
    settle = packed_queue_module._settle

    def counted(*args):
        count[0] += 1
        return settle(*args)

    monkeypatch.setattr(packed_queue_module, "_settle", counted)
    return count


def test_a_plans_check_and_its_why_settle_no_queue_its_figures_settled(settles):
    solved = optimize(as_problem(load_scenario(EXAMPLE)), SolveConfig(time_limit_s=60, marginals=False))
    problem = as_problem(load_scenario(EXAMPLE))  # a fresh problem: nothing settled yet
    settles[0] = 0
    plan = with_metrics(problem, solved)
    assert settles[0] > 0
    assert plan.metrics == solved.metrics  # the same figures as the solve's own
    figured = settles[0]
    assert validate(problem, plan) == []
    why = explain(problem, plan)
    assert why.pools and settles[0] == figured


def test_each_engine_settles_its_own_queues():
    """Instance models of two engines compare equal field by field (the kernels are not compared), so the
    settled queues are kept per problem's model, never shared by value: the same P mix waits differently."""
    data = small_pdd_dict()
    problems = {}
    for engine in ("roofline", "sglang"):
        problems[engine] = resolve(parse_scenario({**data, "engine": engine}))
    chip, tp = next(iter(problems["roofline"].datacenters[0].inventory)), problems["roofline"].options.tp_degrees[0]
    models = {engine: instance(p, chip, tp) for engine, p in problems.items()}
    assert models["roofline"] is not models["sglang"]
    cls = problems["roofline"].classes[0]
    s = models["roofline"].prefill_s(cls.input_tokens, cls.hit_rate)
    items = [(0.6 / s, s, (1 - cls.hit_rate) * cls.input_tokens)]  # one queue, asked of both models
    states = {engine: packed_queue(items, 1.0, im) for engine, im in models.items()}
    assert states["roofline"].mean_marginal_s != states["sglang"].mean_marginal_s  # a rider costs what its engine says
    for engine, im in models.items():  # asked again: what each model's own fixed point gives
        assert packed_queue(items, 1.0, im) == packed_queue_module._settle(items, 1.0, im) == states[engine]


def test_a_problem_without_its_lines_keeps_its_instance_models():
    problem = as_problem(load_scenario(EXAMPLE))
    local = without_lines(problem)
    assert local.links == {} and problem.links
    assert instance(local, "GPU-B", 16) is instance(problem, "GPU-B", 16)
