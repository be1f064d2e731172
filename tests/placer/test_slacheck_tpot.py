"""The SLA check reads the TTFT P90's own attainment: requests whose own TPOT is over the SLA leave the
goodput (``metrics.sla_attainment``: the simulator's count) but do not make a plan that meets its TTFT P90
read as a miss (``metrics.sla_met``, ``optimize``'s exit code)."""

from __future__ import annotations

from types import SimpleNamespace

from placer.slacheck import sla_status


def _flow(rps: float, late: float, tpot_late: float) -> SimpleNamespace:
    return SimpleNamespace(request_class="c", rps=rps, meets_tpot=True, tpot_late=tpot_late,
                           prob_late=lambda budget_s: late)


def test_tpot_late_requests_lower_the_goodput_not_the_p90_verdict():
    problem = SimpleNamespace(ttft_p90_s=2.0, tpot_s=0.05)
    flows = [_flow(4.0, 0.05, 0.2), _flow(1.0, 0.10, 0.0)]  # 94 % within the TTFT budget
    served = sum(f.rps for f in flows)
    good = sum(f.rps * (1 - f.prob_late(2.0)) * (1 - f.tpot_late) for f in flows)  # 76.8 % of requests
    analysis = SimpleNamespace(flows=flows, metrics=SimpleNamespace(ttft_p90_s=1.9, sla_attainment=good / served))
    assert good / served < 0.9
    assert sla_status(problem, analysis) == (True, [])
