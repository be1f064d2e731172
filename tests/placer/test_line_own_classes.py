"""A P instance's own transfers on the line when the plan splits it into two queues (issue 42, rnd-7-30).

On the hardware an instance has one first-come-first-served queue whatever the plan's queues
(:func:`placer.pdd.queue_layout`), so its KV leaves at its prefills' ends one prefill apart whichever queue a
request came by: its transfers are ONE stream onto a line (:func:`placer.line_law.line_stream_utilizations`).
"""

from __future__ import annotations

import pytest

from bench.agreement_cases import line
from placer.flows import instance
from placer.line_law import line_stream_utilizations
from placer.plan import Assignment, Plan, PoolOut
from placer.problem import resolve
from placer.queue_laws import p_instance_laws
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict


def _shared_plan(problem, queues):
    """One H100 tp2 P instance in dc-a sending its short classes' KV (a 10- and a 34-ms transfer, a 13- and a
    36-ms prefill) to dc-b over a 50-Gbit/s line, its load split over ``queues`` ((name, instances, share of the
    load)): 60 % busy in all, the line 53 %."""
    im = instance(problem, "H100-SXM", 2)
    short = [c for c in problem.classes if c.name in ("hot", "warm")]
    total = sum(c.share for c in short)
    pre = sum(c.share / total * im.prefill_s(c.input_tokens, c.hit_rate) for c in short)
    rows = [Assignment(role="P", datacenter="dc-a", chip="H100-SXM", tp=2, request_class=c.name, pipeline="P-MD",
                       dst="dc-b", rps=0.6 / pre * part * c.share / total, queue=q, queue_instances=n)
            for q, n, part in queues for c in short]
    plan = Plan(scenario="small-pdd", pools=[PoolOut(role="P", datacenter="dc-a", chip="H100-SXM", tp=2, count=1)],
                assignments=rows)
    counts = {("P", "dc-a", "H100-SXM", 2): 1}
    waits = p_instance_laws(problem, plan, counts, {key: im for key in counts})
    return line_stream_utilizations(problem, plan, {c.name: c for c in problem.classes}, waits)


def test_two_queues_sharing_an_instance_send_one_stream_onto_the_line():
    """The plan splits one instance into two queues (0.75 and 0.25 of it): each class's line slowdown is the
    one queue's that carries both (utilisation 0.458 for the hot class, 0.387 for the warm); taken as two
    streams, each met the other's transfers as another instance's (0.487-0.503 and 0.438-0.493: rnd-7-30's
    0.31-s transfers read 0.062 s of excess where the simulated line gave 0.002 s)."""
    problem = resolve(parse_scenario(small_pdd_dict(links=line(50))))
    one = _shared_plan(problem, [("all", 1.0, 1.0)])
    two = _shared_plan(problem, [("busy", 0.75, 0.75), ("quiet", 0.25, 0.25)])
    for c in problem.classes[:2]:
        alone = one[("P", "dc-a", "H100-SXM", 2, "all", 0, "dc-b", c.name)].utilization
        for q in ("busy", "quiet"):
            assert two[("P", "dc-a", "H100-SXM", 2, q, 0, "dc-b", c.name)].utilization == pytest.approx(alone, rel=1e-6)
