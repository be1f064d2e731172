"""The SLA length factor of tail_notes is kept per (instance, class, SLA): the same answers as the bisection,
computed once (issue 47: the bisection per P assignment was 0.1-0.3 s of pdd-two-dc's solve)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

import placer.queue_laws as queue_laws
from placer.flows import instance
from placer.optimize import SolveConfig, optimize
from placer.perfmodel.instance import InstanceModel
from placer.problem import resolve
from placer.specs import load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def two_dc():
    problem = resolve(load_scenario(EXAMPLES / "pdd-two-dc.yaml"))
    plan = optimize(problem, SolveConfig(marginals=False, time_limit_s=60))
    return problem, plan


def test_the_kept_factor_equals_the_bisection_over_chips_classes_and_slas(two_dc):
    problem, _ = two_dc
    ims = {instance(problem, chip, tp) for dc in problem.datacenters for chip in dc.inventory for tp in (8, 16)
           if dc.inventory[chip] >= tp}
    classes = list(problem.classes) + [dataclasses.replace(problem.classes[0], input_tokens=200_000)]
    for im, c, sla in itertools.product(ims, classes, (0.05, 0.5, 2.0, 30.0)):
        assert queue_laws._sla_length_factor(im, c, sla) == queue_laws._length_factor(
            im, c.input_tokens, c.hit_rate, sla)
    assert len(ims) >= 2


def test_tail_notes_bisect_once_per_instance_and_class(two_dc, monkeypatch):
    problem, plan = two_dc
    queue_laws._sla_length_factor_of.cache_clear()
    first = queue_laws.tail_notes(problem, plan)
    calls = []
    original = InstanceModel.prefill_s

    def counted(self, input_tokens, hit_rate):
        calls.append(input_tokens)
        return original(self, input_tokens, hit_rate)

    monkeypatch.setattr(InstanceModel, "prefill_s", counted)
    assert queue_laws.tail_notes(problem, plan) == first  # same notes, not one prefill re-priced
    assert calls == []
