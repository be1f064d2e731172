"""Why a plan looks as it does: reasons derived from the flows, pool use, sorted binding rows."""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace

from placer.flows import Route, instance
from placer.pdd import P_MD
from placer.report.why import explain, pipeline_reasons
from tests.placer.service.dashboard.support import MICRO


def test_a_relaying_plan_names_the_classes_p_md_would_make_late():
    """A 10 Gbit/s line and a half-cached 16K-token class with long answers (so not filtered): its
    prefill + KV move on P-MD take longer than the 1 s budget, so the plan relays it for its TTFT.
    (On a 5 Gbit/s line, since decode KV admission, the plan serves that class on P-MD within dc-a
    or within dc-b instead, and relays only the hot class, for the line's load.)"""
    from placer.optimize import SolveConfig, optimize
    from placer.problem import resolve
    from placer.specs import parse_scenario
    from tests.placer.sim.conftest import small_pdd_dict
    from tests.placer.sim.test_relay_agreement import LOW_HIT, _line

    classes = copy.deepcopy(LOW_HIT)
    classes[1]["hit_rate"] = 0.5
    relay_problem = resolve(parse_scenario(small_pdd_dict(links=_line(10), workload={"arrival_rps": 16.0,
                                                                                    "classes": classes})))
    relay_plan = optimize(relay_problem, SolveConfig(marginals=False))
    lines = pipeline_reasons(relay_problem, relay_plan)
    relay = next(line for line in lines if line.startswith("P-RLD-MD carries"))
    late = re.search(r"\(([^)]*)\) would miss the ([\d.]+) s TTFT budget", relay)
    assert late, relay
    p = next(p for p in relay_plan.pools if p.role == "P" and p.count > 0)
    dst = next(p.datacenter for p in relay_plan.pools if p.role == "MD" and p.count > 0)
    for name in late.group(1).rstrip("…").split(", "):
        c = next(c for c in relay_problem.classes if c.name == name)
        best = min(instance(relay_problem, q.chip, q.tp).prefill_s(c.input_tokens, c.hit_rate)
                   for q in relay_plan.pools if q.role == "P" and q.datacenter == p.datacenter)
        assert best + Route(relay_problem, c, P_MD, p.datacenter, dst, relay_problem.options.drc).wan_s(0.0) \
            > relay_problem.ttft_p90_s


def test_a_plan_without_relay_says_every_transfer_fits():
    """The micro scenario on a 40 Gbit/s line: every class's prefill + KV move fits the 2 s budget on
    P-MD (on its own 10 Gbit/s line the odd class's takes 2.03 s), so nothing needs RLD."""
    from placer.optimize import as_problem, optimize
    from placer.specs import parse_scenario

    data = copy.deepcopy(MICRO)
    data["links"][0]["gbit_per_s"] = 40
    micro_scenario = parse_scenario(data)
    micro_plan = optimize(micro_scenario)
    why = explain(as_problem(micro_scenario), micro_plan)
    assert any(line.startswith("RLD unused: every class's WAN transfer fits its TTFT budget") for line in why.pipelines)
    assert {u.key for u in why.pools} == {p.key for p in micro_plan.pools if p.count > 0}
    assert all(0 <= u.utilization <= 1 and 0 <= u.kv_gib_used <= u.kv_gib_capacity for u in why.pools)
    deltas = [b["delta"] for b in why.binding if b["delta"] is not None]
    assert deltas == sorted(deltas, reverse=True)
    assert all(b["why"] for b in why.binding if b["delta"] is not None and abs(b["delta"]) < 5e-4)
    assert sum(float(r["rps"]) for r in why.routes) == \
        sum(round(sum(x.rps for x in micro_plan.routes if (x.pipeline, x.src, x.dst) == (r["pipeline"], r["src"],
                                                                                        r["dst"])), 2)
            for r in why.routes)


def test_the_dashboard_explains_a_stored_plan_from_its_stored_scenario(micro_plan):
    from placer.service.dashboard.views import plan_why

    why, missing = plan_why(SimpleNamespace(inputs={"scenario": copy.deepcopy(MICRO)}), micro_plan)
    assert missing is None and why.pipelines and why.pools
    why, missing = plan_why(SimpleNamespace(inputs={}), micro_plan)
    assert why is None and "without its scenario" in missing


def test_a_class_relayed_though_p_md_fits_is_said_to_be_a_bcr_choice(relay_problem, relay_plan):
    relay = next(line for line in pipeline_reasons(relay_problem, relay_plan) if line.startswith("P-RLD-MD"))
    assert "would meet the 1 s budget for them before queueing" in relay and "higher BCR" in relay
