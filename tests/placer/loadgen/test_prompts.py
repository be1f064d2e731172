"""The bench's prompts: exact lengths in units, a session's prefix shared exactly, a trace's blocks shared."""

from __future__ import annotations

import os

import numpy as np
import pytest

from placer.loadgen.prompts import PromptBuilder, class_requests, trace_requests, warmup_requests
from placer.loadgen.stats import quantile, relative_errors
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.workload.trace import TraceRecord
from tests.placer.loadgen.support import scenario_dict


def _common(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


@pytest.fixture
def classes():
    return resolve(parse_scenario(scenario_dict(hit=0.75, input_tokens=400, output_tokens=8))).classes


def test_a_sessions_requests_share_exactly_its_prefix_and_other_sessions_share_nothing(classes):
    reqs = list(class_requests(classes, 10.0, seed=0, count=200, duration_s=None, sessions=3))
    build = PromptBuilder(seed=0)
    texts = {r.index: build.text(r) for r in reqs}
    assert all(len(texts[r.index]) == r.input_tokens == 400 for r in reqs)
    warm = [r for r in reqs if r.request_class == "warm"]
    assert {r.session for r in warm} == {"warm/0", "warm/1", "warm/2"} and all(r.hit_tokens == 300 for r in warm)
    a, b = [r for r in warm if r.session == "warm/0"][:2]
    c = next(r for r in warm if r.session == "warm/1")
    assert 300 <= _common(texts[a.index], texts[b.index]) < 310  # the prefix, then each its own
    assert _common(texts[a.index], texts[c.index]) < 10
    cold = [r for r in reqs if r.request_class == "cold"]
    assert all(_common(texts[cold[0].index], texts[r.index]) < 10 for r in cold[1:])


def test_shares_and_the_poisson_rate_follow_the_scenario(classes):
    reqs = list(class_requests(classes, 20.0, seed=1, count=4000, duration_s=None))
    share = sum(r.request_class == "warm" for r in reqs) / len(reqs)
    assert share == pytest.approx(0.75, abs=0.03)
    assert len(reqs) / reqs[-1].arrival_s == pytest.approx(20.0, rel=0.05)
    bounded = list(class_requests(classes, 20.0, seed=1, count=4000, duration_s=10.0))
    assert bounded == reqs[:len(bounded)] and bounded[-1].arrival_s <= 10.0 < reqs[len(bounded)].arrival_s


def test_word_units_are_space_led_words_one_per_token(classes):
    req = next(class_requests(classes, 1.0, seed=0, count=1, duration_s=None))
    text = PromptBuilder(unit="word").text(req)
    assert text.startswith(" ") and len(text.split()) == 400


def test_warmup_sends_each_sessions_prefix_once(classes):
    reqs = list(class_requests(classes, 10.0, seed=0, count=100, duration_s=None, sessions=2))
    warm = warmup_requests(reqs)
    assert sorted(w.session for w in warm) == ["warm/0", "warm/1"]  # cold has no prefix to prime
    build = PromptBuilder(seed=0)
    first = next(r for r in reqs if r.session == "warm/1")
    primer = next(w for w in warm if w.session == "warm/1")
    assert build.text(first).startswith(build.text(primer)) and len(build.text(primer)) == 300


def test_trace_hash_ids_become_shared_blocks_at_the_traces_times():
    recs = [TraceRecord(10.0, 1200, 5, hash_ids=(1, 2, 3)), TraceRecord(10.5, 1100, 5, hash_ids=(1, 2, 9)),
            TraceRecord(12.0, 300, 5, hit_rate=0.5)]
    reqs = list(trace_requests(recs, count=10, duration_s=None, time_scale=2.0))
    assert [r.arrival_s for r in reqs] == [0.0, 0.25, 1.0]
    build = PromptBuilder()
    a, b = build.text(reqs[0]), build.text(reqs[1])
    assert (len(a), len(b)) == (1200, 1100) and 1024 <= _common(a, b) < 1034
    assert reqs[2].hit_tokens == 150 and len(build.text(reqs[2])) == 300


def test_quantiles_are_numpys_and_errors_are_relative():
    xs = list(np.random.default_rng(0).exponential(size=101))
    for q in (0.5, 0.9, 0.99):
        assert quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))
    assert quantile([], 0.5) is None
    assert relative_errors({"ttft_p90_s": 1.5, "goodput_rps": 2.0, "requests": 9},
                           {"ttft_p90_s": 1.0, "goodput_rps": 0.0, "requests": 3}) == {"ttft_p90_s": 0.5}
