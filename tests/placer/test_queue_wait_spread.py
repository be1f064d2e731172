"""The MILP's P-queue law (flows.queue_wait_law) prices a class's spread of prompt lengths."""

from __future__ import annotations

import copy

import pytest

from placer.flows import instance
from placer.p_queues import light_classes, queue_wait_law
from placer.pdd import MIX
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import MICRO, micro_dict


def _problem(cv2: float):
    workload = copy.deepcopy(MICRO["workload"])
    for c in workload["classes"]:
        c["new_tokens_cv2"] = cv2
    return resolve(parse_scenario(micro_dict(workload=workload)))


@pytest.mark.parametrize("mix", [MIX, "light"])
def test_a_spread_class_waits_longer_in_the_ilp_p_queue_than_the_same_class_alike(mix):
    """Same mean prompt, variance 4× the mean²: a few long prompts hold the P instance while the
    rest queue, so the M/G/1 wait the MILP prices grows (E[S²] beyond the mean's square)."""
    alike, spread = _problem(0.0), _problem(4.0)
    im = instance(alike, "H100-SXM", 2)
    assert light_classes(alike, im)  # the light law has classes to bound
    w_alike = queue_wait_law(alike, im, 0.6, mix)
    w_spread = queue_wait_law(spread, im, 0.6, mix)
    assert w_spread.mean_wait_s > 1.5 * w_alike.mean_wait_s
    assert w_spread.quantile_s(0.9) > 1.5 * w_alike.quantile_s(0.9)


def test_classes_alike_keep_the_mean_prefill_law():
    problem = _problem(0.0)
    im = instance(problem, "H100-SXM", 2)
    law = queue_wait_law(problem, im, 0.5, MIX)
    times = [(c.share, im.prefill_s(c.input_tokens, c.hit_rate)) for c in problem.classes]
    assert law.mean_s == sum(s * t for s, t in times)
    assert law.second_moment_s2 == sum(s * t * t for s, t in times)
