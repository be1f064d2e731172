"""A frontier row's status says how the plan fell short only when it did: a tail note (a class whose
longest prompts cannot meet the SLA) is not a miss while the planned P90 is within the SLA; aliases
name baselines too (issue 45)."""

from __future__ import annotations

import pytest

from placer.baselines import NO_SLA_NOTE, PARTIAL_NOTE
from placer.errors import InputError
from placer.frontier import check_baselines, row_status
from placer.plan import Metrics, Plan, PoolOut

TAIL = ("tail: 28.5% of class 'anomalous' (0.0996 req/s, 1.0% of the traffic) cannot meet the TTFT SLA of 2 s: "
        "prompts over 40,960 new tokens take longer than that to prefill alone on its P pools")


def _plan(notes=(), served: float = 10.0, p90: float = 1.83, sla_met: bool | None = True) -> Plan:
    return Plan(scenario="s", pools=[PoolOut(role="P", datacenter="dc-a", chip="Ascend-910B", tp=16, count=1)],
                notes=list(notes), metrics=Metrics(served_rps=served, offered_rps=10.0, ttft_p90_s=p90,
                                                   sla_attainment=0.92, sla_met=sla_met))


def test_a_tail_note_is_not_a_missed_sla_when_the_planned_p90_is_within_it():
    """The flagship's PDD plan: P90 1.83 s under the 2 s SLA, 1 % of the traffic's longest prompts in the tail."""
    assert row_status(_plan([TAIL])) == "ok"
    assert row_status(_plan(["baseline same-dc-pd", PARTIAL_NOTE, TAIL], served=4.96)) == "partial load"


def test_a_plan_that_misses_the_sla_says_so():
    assert row_status(_plan(p90=2.4, sla_met=False)) == "misses SLA"
    assert row_status(_plan(["baseline agg", NO_SLA_NOTE], p90=6.1, sla_met=None)) == "misses SLA"


def test_baselines_are_named_by_their_aliases_too():
    assert check_baselines(["splitwise", "same-dc-pd", "hetero-same-dc-pd"]) == ["hetero-same-dc-pd", "same-dc-pd"]
    with pytest.raises(InputError, match="--baselines: unknown 'nope'; known: .*splitwise"):
        check_baselines(["nope"])
