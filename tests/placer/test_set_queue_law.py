"""The whole-instance "set" P queue's planning law (:func:`placer.p_queues.set_wait_law`, what the MILP prices a
set queue's tiers with) against the simulator's own P instance (issue 42).

A set queue owns whole instances and the simulator sends its requests to them at random by the plan's weights
(``SimConfig.dispatch`` "random"), so each instance is an M/G/1 queue at the queue's utilisation with the
admitted classes in proportion: one simulated :class:`~placer.sim.prefill.PrefillInstance` under Poisson
arrivals of the admitted mix, at the req/s that load it to ρ by the law's own mean service. The flagship's
heavy set (hit-0-90 + anomalous: 29K- and 56K-token prompts, chunked, never packed) and a chunked pair of the
small relay case, at ρ 0.4-0.8: the mean wait within 10 % and the P90 within 15 % (the law's tail is the
exponential of its mean; the exact M/G/1 tail of these two-point services is within 5 % of it). A set of
short prompts packs them, which the planning law leaves out (the evaluation's
:func:`~placer.p_queues.packed_wait_law` prices the packing, ``tests/placer/test_wait_tail.py``): its mean
within 10 % at the cap.
"""

from __future__ import annotations

import pytest

from placer.flows import instance
from placer.p_queues import set_wait_law
from placer.problem import resolve
from placer.shapes import Shape
from placer.specs import load_scenario, parse_scenario
from tests.placer.conftest import EXAMPLES
from tests.placer.sim.conftest import small_pdd_dict
from tests.placer.test_wait_tail import REQUESTS, simulated_p_side_s


@pytest.fixture(scope="module")
def flagship():
    return resolve(load_scenario(EXAMPLES / "pdd-two-dc.yaml"))


@pytest.fixture(scope="module")
def small():
    return resolve(parse_scenario(small_pdd_dict()))


def _waits(problem, im, admitted: frozenset[int], rho: float) -> tuple[list[float], object]:
    """The simulated waits (P side less the prompt's prefill alone) of a set queue's requests on one instance
    at utilisation ``rho`` of the law's own service, and the law."""
    law = set_wait_law(problem, im, rho, admitted)
    rps = rho / law.mean_s
    total = sum(problem.classes[k].share for k in admitted)
    mix = [(problem.classes[k].share / total, problem.classes[k].input_tokens, problem.classes[k].hit_rate)
           for k in sorted(admitted)]
    sides = simulated_p_side_s(im, mix, rps)
    alone = [im.prefill_s(n, h) for _, n, h in mix]
    return [s - a for xs, a in zip(sides, alone) for s in xs], law


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


@pytest.mark.parametrize("tp,rho", [(16, 0.4), (32, 0.6), (32, 0.8)])
def test_the_flagships_heavy_set_queue_waits_as_its_law_says(flagship, tp, rho):
    im = instance(flagship, "Ascend-910B", Shape(tp, "dep"))
    heavy = frozenset(k for k, c in enumerate(flagship.classes) if c.name in ("hit-0-90", "anomalous"))
    waits, law = _waits(flagship, im, heavy, rho)
    assert len(waits) > 0.85 * REQUESTS
    assert sum(waits) / len(waits) == pytest.approx(law.mean_wait_s, rel=0.10)
    assert _p90(waits) == pytest.approx(law.quantile_s(0.9), rel=0.15)


def test_a_chunked_pair_set_queue_waits_as_its_law_says(small):
    """The small relay case's cold (9.8K new tokens) and odd (14.7K) prompts on H100 tp1: one or two chunks."""
    im = instance(small, "H100-SXM", 1)
    pair = frozenset(k for k, c in enumerate(small.classes) if c.name in ("cold", "odd"))
    waits, law = _waits(small, im, pair, 0.7)
    assert sum(waits) / len(waits) == pytest.approx(law.mean_wait_s, rel=0.10)
    assert _p90(waits) == pytest.approx(law.quantile_s(0.9), rel=0.15)


def test_a_set_of_short_prompts_meets_its_law_packed_at_the_cap(small):
    """hot and warm (492 and 1.6K new tokens) pack into shared forwards, which the planning law leaves out both
    ways (:meth:`placer.flows.Route.first_token_law`: the prediction adds the forward-mates' time, the planning
    rule does not): a packed queue waits less, a packed prompt finishes with its forward. At the cap (0.8, where
    the split's set queues are planned) their P side past prefill is the law's wait within 10 % (+6 %); at 0.5 the
    forward-mates' time leads (+24 %, 5 ms on a 22 ms wait)."""
    im = instance(small, "H100-SXM", 1)
    short = frozenset(k for k, c in enumerate(small.classes) if c.name in ("hot", "warm"))
    waits, law = _waits(small, im, short, 0.8)
    assert sum(waits) / len(waits) == pytest.approx(law.mean_wait_s, rel=0.10)
