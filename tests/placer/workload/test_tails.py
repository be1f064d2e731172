"""Workloads keep their tails (issue 42, part 2): the fit holds E[new tokens²], the P queue's wait
reads a class's spread, and a finite prefix cache hits less than the trace's ideal."""

from __future__ import annotations

import pytest

from placer.evaluate import analyze
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.workload import classes_from_trace, fit_classes, read_trace, with_hit_rates
from tests.placer.conftest import micro_dict
from tests.placer.workload.test_trace import MOONCAKE


def _second_moment(classes) -> float:
    """E[new²] the classes carry: Σ share · n̄² (1 + cv²)."""
    return sum(c.share * ((1 - c.hit_rate) * c.input_tokens) ** 2 * (1 + c.new_tokens_cv2) for c in classes)


def test_a_long_prompt_tail_gets_its_own_class_and_the_second_moment_is_kept():
    # one hit bucket: 95 % short prompts, 5 % forty times longer (the tail that makes a P queue wait)
    records = ([{"input_tokens": 2000 + 10 * (i % 7), "output_tokens": 300, "hit_rate": 0.5} for i in range(190)]
               + [{"input_tokens": 80000 + 100 * i, "output_tokens": 900, "hit_rate": 0.5} for i in range(10)])
    classes = fit_classes(records)
    news = [(1 - r["hit_rate"]) * r["input_tokens"] for r in records]
    truth = sum(n * n for n in news) / len(news)
    assert len(classes) == 2  # the tail is its own class, not folded into a mean of ~6K tokens
    tail = max(classes, key=lambda c: c.input_tokens)
    assert tail.share == pytest.approx(0.05) and tail.input_tokens > 80000 and tail.output_tokens == 900
    assert sum(c.share * ((1 - c.hit_rate) * c.input_tokens) ** 2 for c in classes) >= 0.95 * truth
    assert _second_moment(classes) == pytest.approx(truth, rel=1e-3)  # the spread left inside is carried


def test_the_bundled_trace_keeps_its_second_moment_of_new_tokens():
    records = list(with_hit_rates(read_trace(MOONCAKE)))
    truth = sum(((1 - r.hit_rate) * r.input_tokens) ** 2 for r in records) / len(records)
    classes = classes_from_trace(MOONCAKE)
    means_only = sum(c.share * ((1 - c.hit_rate) * c.input_tokens) ** 2 for c in classes)
    assert means_only >= 0.9 * truth  # the old fit's means held about half of it
    assert _second_moment(classes) == pytest.approx(truth, rel=0.01)
    assert max(c.input_tokens for c in classes) > 80000  # the longest prompts are a class of their own


@pytest.fixture(scope="module")
def micro_plan():
    problem = resolve(parse_scenario(micro_dict()))
    return optimize(problem, SolveConfig(marginals=False))


def test_the_p_queue_wait_and_the_promised_tail_grow_with_a_class_spread(micro_plan):
    def promised(cv2: float):
        data = micro_dict()
        for c in data["workload"]["classes"]:
            c["new_tokens_cv2"] = cv2
        return analyze(resolve(parse_scenario(data)), micro_plan).metrics.ttft_p90_s

    flat, spread, wide = promised(0.0), promised(1.0), promised(4.0)
    assert flat < spread < wide


def test_a_finite_prefix_cache_hits_less_than_the_ideal():
    ideal = [r.hit_rate for r in with_hit_rates(read_trace(MOONCAKE))]
    small = [r.hit_rate for r in with_hit_rates(read_trace(MOONCAKE), cache_tokens=512 * 2000)]
    huge = [r.hit_rate for r in with_hit_rates(read_trace(MOONCAKE), cache_tokens=512 * 10**7)]
    assert huge == ideal  # a cache that never fills is the ideal
    assert sum(small) < 0.8 * sum(ideal)
    assert all(s <= i + 1e-12 for s, i in zip(small, ideal))  # LRU never beats the unbounded cache here


def test_a_scenario_trace_counts_hits_under_its_prefix_cache():
    def hit(cache_tokens):
        data = micro_dict()
        data["workload"] = {"arrival_rps": 3.0, "trace": str(MOONCAKE)}
        if cache_tokens:
            data["workload"]["prefix_cache_tokens"] = cache_tokens
        problem = resolve(parse_scenario(data))
        new = sum(c.share * (1 - c.hit_rate) * c.input_tokens for c in problem.classes)
        return 1 - new / sum(c.share * c.input_tokens for c in problem.classes)

    assert hit(512 * 2000) < hit(None) - 0.05


def test_a_plan_names_the_tail_it_cannot_serve_within_the_sla(micro_plan):
    from placer.queue_laws import tail_notes

    def notes(cv2: float):
        data = micro_dict()
        for c in data["workload"]["classes"]:
            c["new_tokens_cv2"] = cv2
        return tail_notes(resolve(parse_scenario(data)), micro_plan)

    assert notes(0.0) == []  # every prompt of the mean length prefills within the SLA
    wide = notes(8.0)
    assert wide and "cold" in " ".join(wide) and "cannot meet the TTFT SLA" in wide[0]


def test_class_requests_draw_a_class_spread_and_keep_its_mean():
    import random

    from placer.workload import class_requests
    from placer.specs import RequestClass

    flat = RequestClass(name="a", share=1.0, input_tokens=8000, output_tokens=400, hit_rate=0.5)
    wide = flat.model_copy(update={"new_tokens_cv2": 2.0, "output_tokens_cv2": 0.5})
    draws = [r for r, _ in zip(class_requests([wide], 10.0, random.Random(3)), range(20000))]
    new = [r[2] * (1.0 - r[4]) for r in draws]  # the spread is of new tokens, behind the class's cached prefix
    mean = sum(new) / len(new)
    var = sum((x - mean) ** 2 for x in new) / len(new)
    assert mean == pytest.approx(4000, rel=0.05) and var / mean ** 2 == pytest.approx(2.0, rel=0.25)
    assert {round(r[2] * r[4]) for r in draws} == {4000}
    assert {r[2] for r, _ in zip(class_requests([flat], 10.0, random.Random(3)), range(100))} == {8000}
