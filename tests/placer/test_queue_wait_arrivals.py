"""The MILP's P-queue law (p_queues.queue_wait_law) under arrivals that are not Poisson (issue 48):
G/G/1 at the cv² one instance of the queue sees at the tier's utilisation."""

from __future__ import annotations

import dataclasses

import pytest

from placer.flows import instance
from placer.p_queues import light_classes, queue_wait_law
from placer.pdd import LIGHT, MIX
from placer.problem import resolve
from placer.queueing import split_cv2
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict


@pytest.fixture(scope="module")
def micro():
    problem = resolve(parse_scenario(micro_dict()))
    return problem, instance(problem, "H100-SXM", 2)


@pytest.mark.parametrize("mix", [MIX, LIGHT])
def test_burstier_arrivals_wait_longer_in_the_milps_p_queue(micro, mix):
    problem, im = micro
    assert light_classes(problem, im)
    poisson = queue_wait_law(problem, im, 0.7, mix)
    bursty = queue_wait_law(dataclasses.replace(problem, arrival_cv2=4.0), im, 0.7, mix)
    assert bursty.quantile_s(0.9) > 1.2 * poisson.quantile_s(0.9)


def test_a_mix_queue_takes_the_cv2_of_one_instance_at_its_utilisation(micro):
    problem, im = micro
    shaped = dataclasses.replace(problem, arrival_cv2=0.5)
    law = queue_wait_law(shaped, im, 0.6, MIX)
    share = 0.6 / law.mean_s / problem.arrival_rps  # the req/s one instance at ρ 0.6 carries, of the stream
    assert law.arrival_cv2 == pytest.approx(split_cv2(0.5, share))
    assert law.mean_wait_s < queue_wait_law(problem, im, 0.6, MIX).mean_wait_s

