"""Bucketing requests into the planner's classes."""

from __future__ import annotations

import pytest

from placer.errors import InputError
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.workload import classes_from_trace, fit_classes
from tests.placer.conftest import micro_dict
from tests.placer.workload.test_trace import MOONCAKE


def test_classes_keep_each_buckets_share_lengths_and_prefill_work():
    records = ([{"input_tokens": 60000, "output_tokens": 1000, "hit_rate": 0.99}] * 60
               + [{"input_tokens": 40000, "output_tokens": 800, "hit_rate": 0.96}] * 20
               + [{"input_tokens": 1000, "output_tokens": 200, "hit_rate": 0.3},
                  {"input_tokens": 3000, "output_tokens": 400, "hit_rate": 0.34}] * 5
               + [{"input_tokens": 50000, "output_tokens": 100, "hit_rate": 0.05}] * 10)
    classes = {c.name: c for c in fit_classes(records)}
    assert sum(c.share for c in classes.values()) == pytest.approx(1.0, abs=1e-9)
    assert classes["anomalous"].share == pytest.approx(0.10)  # long input, low hit, short output
    low = classes["hit-30-40"]
    assert (low.share, low.input_tokens, low.output_tokens) == (pytest.approx(0.10), 2000, 300)
    # token-weighted hit: the class's new tokens equal the bucket's
    assert (1 - low.hit_rate) * low.input_tokens * 10 == pytest.approx(5 * (700 + 1980), rel=1e-4)


def test_rare_buckets_merge_into_a_neighbour():
    records = ([{"input_tokens": 1000, "output_tokens": 100, "hit_rate": 0.95}] * 99
               + [{"input_tokens": 1000, "output_tokens": 100, "hit_rate": 0.5}])
    classes = fit_classes(records, min_share=0.02)
    assert len(classes) == 1 and classes[0].share == 1.0
    assert fit_classes(records, min_share=0.0)[0].name == "hit-50-60"


def test_objects_with_the_fields_work_as_records():
    class Logged:
        def __init__(self, i):
            self.input_tokens, self.output_tokens, self.hit_rate = 4096, 256, 0.9 + i / 1000

    classes = fit_classes(Logged(i) for i in range(50))
    assert classes[0].input_tokens == 4096 and classes[0].share == 1.0


@pytest.mark.parametrize(("records", "words"), [
    ([], "no requests"),
    ([{"input_tokens": 10, "output_tokens": 1}], "no 'hit_rate'"),
    ([{"input_tokens": 10, "output_tokens": 1, "hit_rate": 2}], "hit_rate 2"),
])
def test_bad_records_are_input_errors(records, words):
    with pytest.raises(InputError, match=words):
        fit_classes(records)


def test_a_scenario_can_take_its_classes_from_a_trace():
    data = micro_dict()
    data["workload"] = {"arrival_rps": 3.0, "trace": str(MOONCAKE)}
    problem = resolve(parse_scenario(data))
    fitted = classes_from_trace(MOONCAKE)
    assert [c.name for c in problem.classes] == [c.name for c in fitted]
    assert sum(c.share for c in problem.classes) == pytest.approx(1.0)
    mean_hit = sum(c.share * c.hit_rate for c in problem.classes)
    assert 0.2 < mean_hit < 0.5
    assert any(c.filterable for c in problem.classes)  # Mooncake has long, cold, short-answer requests
