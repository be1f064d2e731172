"""A flow's first token waits for KV room with its own class's wait (issue 42, part 1: the classes a pool
actually serves): ``placer.evaluate`` reads :func:`placer.decode_sites.class_kv_waits` per (role, datacenter,
class). Before, every class at a site took the site's average over its pools: rnd-7-25's c2-c4, routed only to
tp8-dep decoders that never waited, were priced with the B200 tp4 pool's 0.77-s wait (16-23 % over the
simulator's P90)."""

from __future__ import annotations

import functools

import pytest

import placer.evaluate as evaluate
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.specs import parse_scenario
from bench.agreement_cases import CASES, small_pdd_dict


@functools.cache
def _case():
    problem = resolve(parse_scenario(small_pdd_dict(**CASES["10g-low-hit"])))
    return problem, optimize(problem, SolveConfig(marginals=False))


def _late(analysis, budget_s: float = 1.0) -> dict[str, float]:
    out: dict[str, float] = {}
    for f in analysis.flows:
        out[f.request_class] = out.get(f.request_class, 0.0) + f.rps * f.prob_late(budget_s)
    return out


def test_only_the_waiting_class_pays_for_kv_room(monkeypatch: pytest.MonkeyPatch) -> None:
    problem, plan = _case()
    before = _late(evaluate.analyze(problem, plan))
    classes = sorted(before)
    assert len(classes) >= 2
    waiting = classes[0]
    sites = {(k.role, k.datacenter) for k in evaluate.analyze(problem, plan).decode}
    fake = {(*site, waiting): (0.5, 3.0) for site in sites}  # half its arrivals wait 3 s wherever it decodes
    monkeypatch.setattr(evaluate, "class_kv_waits", lambda decode: fake)
    after = _late(evaluate.analyze(problem, plan))
    assert after[waiting] > before[waiting] + 0.1 * sum(f.rps for f in evaluate.analyze(problem, plan).flows
                                                         if f.request_class == waiting)
    for c in classes[1:]:  # the other classes decode beside it and wait for nothing (they move ~1e-6: numerical)
        assert after[c] == pytest.approx(before[c], rel=1e-4)
