"""A baseline that misses the SLA is told by what binds it (the TPOT SLA when its TTFT P90 is within
budget, not "prefill queueing"); the break-even names the same-dc-pd plan it measures against (issue 45)."""

from __future__ import annotations

from placer.baselines import sla_verdict
from placer.breakeven import against_words
from placer.plan import Metrics, Plan, PoolOut
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict


def one_dc():
    return resolve(parse_scenario(micro_dict(datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 8}}],
                                             links=[])))


def _agg(ttft_p90_s: float, tpot_s: float, attainment: float, served: float = 6.0) -> Plan:
    return Plan(scenario="micro", pools=[PoolOut(role="A", datacenter="dc-a", chip="H100-SXM", tp=2, count=4)],
                metrics=Metrics(served_rps=served, offered_rps=6.0, ttft_p90_s=ttft_p90_s, tpot_s=tpot_s,
                                sla_attainment=attainment))


def test_a_plan_within_the_ttft_budget_that_misses_the_sla_is_told_its_decode_step_binds():
    """agg on one datacenter: TTFT P90 0.32 s inside the 2 s budget, every request late on TPOT."""
    said = sla_verdict(one_dc(), _agg(0.317, 0.0532, 0.0))
    assert "prefill queueing" not in said
    assert said == ("cannot meet the SLA: 0 % of its requests meet it: its decode steps take 0.053 s per token, over "
                    "the 0.05 s TPOT SLA (its TTFT P90 0.32 s is within the 2 s budget)")


def test_a_plan_over_the_ttft_budget_without_a_line_is_told_its_prefill_queues():
    said = sla_verdict(one_dc(), _agg(3.4, 0.03, 0.6))
    assert said == ("cannot meet the SLA: 60 % of its requests meet it: its TTFT P90 3.40 s is over the 2 s budget "
                    "(prefill queueing at the load it carries)")


def test_the_break_even_names_the_same_dc_pd_plan_it_measures_against():
    partial = _agg(1.9, 0.03, 0.95, served=2.97)
    assert against_words(partial) == ("same-dc-pd's plan within the inventory, serving 2.97 of 6 req/s at its best "
                                      "BCR (PDD: the whole load)")
    assert against_words(_agg(1.9, 0.03, 0.95)) == "same-dc-pd's plan within the inventory"
