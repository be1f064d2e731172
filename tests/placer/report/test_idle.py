"""Idle capacity explained (issue 44, stumble 4): every chip type a plan leaves idle in a
datacenter gets one line why, computed from the performance model; relay lines argue only
about relay the plan could use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from placer.flows import decode_context_tokens, instance
from placer.optimize import SolveConfig, as_problem, optimize
from placer.report.idle import idle_reasons
from placer.report.why import explain
from placer.specs import load_scenario, parse_scenario

USER = Path(__file__).parents[2] / "data" / "scenarios" / "user-70b-h100-l40s.yaml"
CHAT = [{"name": "chat", "share": 1.0, "input_tokens": 2000, "output_tokens": 200, "hit_rate": 0.5}]


def _scenario(dcs, links=(), ttft=2.0, tpot=0.05, rps=2.0, model="llama-3.1-8b", tp=(1, 2)):
    return parse_scenario({
        "name": "idle", "model": model, "kv_dtype": "bf16",
        "datacenters": [{"name": n, "inventory": inv} for n, inv in dcs],
        "links": [{"src": a, "dst": b, "gbit_per_s": g, "rtt_ms": 20} for a, b, g in links],
        "workload": {"arrival_rps": rps, "classes": CHAT},
        "sla": {"ttft_p90_s": ttft, "tpot_s": tpot}, "options": {"tp_degrees": list(tp)}})


def _solved(scenario):
    return as_problem(scenario), optimize(scenario, SolveConfig(marginals=False))


def _idle_chips(problem, plan) -> dict[tuple[str, str], int]:
    used: dict = {}
    for p in plan.pools:
        used[p.datacenter, p.chip] = used.get((p.datacenter, p.chip), 0) + p.count * int(p.tp)
    return {(dc.name, chip): n - used.get((dc.name, chip), 0) for dc in problem.datacenters
            for chip, n in dc.inventory.items() if n > used.get((dc.name, chip), 0)}


@pytest.fixture(scope="module")
def user():
    return _solved(load_scenario(USER))


def test_the_user_scenario_says_why_each_idle_chip_type_is_idle(user):
    """The issue's scenario left L40S idle in dc-l40s with no word why; now each idle
    (datacenter, chip) has its line, in "why this plan", with the numbers behind it."""
    problem, plan = user
    idle = _idle_chips(problem, plan)
    assert idle, "the scenario's plan leaves chips idle"
    why = explain(problem, plan)
    for (dc, chip), n in idle.items():
        line = next((x for x in why.pipelines if x.startswith(f"{n} of ") and f" {chip} in {dc} idle: " in x), None)
        assert line, (dc, chip, why.pipelines)
        assert re.search(r"(memory|too few|power|too slow|the line too thin|price):", line), line
        assert re.search(r"\d", line.split("idle: ", 1)[1]), line  # figures, not a bare word
    assert why.idle == [x for x in why.pipelines if " idle: " in x]


def test_no_relay_line_argues_about_a_line_no_route_crosses_nor_about_relaying(user):
    """The plan relays nothing: "RLD unused" names only a line some route crosses, and the
    filter line never speaks of relaying."""
    problem, plan = user
    crossed = {f"{r.src}->{r.dst}" for r in plan.routes if r.rps > 0 and r.src != r.dst}
    assert not any(r.pipeline == "P-RLD-MD" and r.rps > 0 for r in plan.routes)
    lines = explain(problem, plan).pipelines
    rld = next(x for x in lines if x.startswith("RLD unused"))
    named = set(re.findall(r"[\w-]+->[\w-]+", rld))
    assert named <= crossed, (rld, crossed)
    assert not any("relaying" in x for x in lines), lines


def test_a_plan_without_wan_routes_says_there_is_nothing_to_relay():
    problem, plan = _solved(_scenario([("dc-a", {"H100-SXM": 4}), ("dc-b", {"L4": 1})], [("dc-a", "dc-b", 10)],
                                      rps=0.5, model="llama-3.1-70b"))
    assert all(r.src == r.dst for r in plan.routes)
    rld = next(x for x in explain(problem, plan).pipelines if x.startswith("RLD unused"))
    assert "no route crosses the WAN" in rld and "->" not in rld


def test_a_filterable_class_on_p_md_is_not_said_to_be_relayed():
    """A class the filter admits but the plan decodes on P-MD: the filter line says P-MD."""
    from tests.placer.service.dashboard.support import MICRO
    import copy

    data = copy.deepcopy(MICRO)
    data["links"][0]["gbit_per_s"] = 40
    data["options"]["filter"] = True
    scenario = parse_scenario(data)
    problem, plan = _solved(scenario)
    relayed = any(r.pipeline == "P-RLD-MD" and r.rps > 0 for r in plan.routes)
    filtered = any(r.pipeline == "P-RLD" and r.rps > 0 for r in plan.routes)
    line = next(x for x in explain(problem, plan).pipelines if x.startswith("P-RLD (filter)"))
    if not filtered:
        assert ("relay" in line) == relayed, line


def test_memory_is_the_reason_when_no_shape_fits():
    """A single 24 GB L4 cannot hold a 70B model: the line says memory, with the chip's GB."""
    problem, plan = _solved(_scenario([("dc-a", {"H100-SXM": 4}), ("dc-b", {"L4": 1})], [("dc-a", "dc-b", 10)],
                                      rps=0.5, model="llama-3.1-70b"))
    [line] = [x for x in idle_reasons(problem, plan) if " L4 in dc-b" in x]
    assert line.startswith("1 of 1 L4 in dc-b idle: memory:") and "24 GB per chip" in line, line
    assert not instance(problem, "L4", 1).fits(2200)


def test_too_slow_is_the_reason_when_neither_role_meets_the_sla():
    """L4 prefills 1000 new tokens slower than a 0.1 s TTFT and steps slower than a 20 ms TPOT."""
    problem, plan = _solved(_scenario([("dc-a", {"H100-SXM": 2, "L4": 2})], ttft=0.1, tpot=0.02, tp=(1,)))
    [line] = [x for x in idle_reasons(problem, plan) if " L4 " in x]
    assert "too slow for the SLA" in line, line
    im = instance(problem, "L4", 1)
    ttft = float(re.search(r"prefill alone takes ([\d.]+) s", line).group(1))
    step_ms = float(re.search(r"decode step ([\d.]+) ms", line).group(1))
    assert ttft == pytest.approx(im.prefill_s(2000, 0.5), abs=0.01) and ttft > 0.1
    assert step_ms == pytest.approx(1000 * im.step_s(1, decode_context_tokens(problem.classes)), abs=0.1)


def test_a_thin_line_is_the_reason_for_a_prefill_only_chip_far_from_decoders():
    """L4 in dc-b can prefill within 1 s but not decode within 20 ms; the decoders are in dc-a
    behind a 0.1 Gbit/s line, over which one request's KV takes seconds."""
    problem, plan = _solved(_scenario([("dc-a", {"H100-SXM": 2}), ("dc-b", {"L4": 2})], [("dc-a", "dc-b", 0.1)],
                                      ttft=1.0, tpot=0.02))
    [line] = [x for x in idle_reasons(problem, plan) if " L4 " in x]
    assert "the line too thin" in line and "dc-b->dc-a" in line, line


def test_price_is_the_reason_when_the_load_is_served_and_names_the_cheaper_chip():
    problem, plan = _solved(_scenario([("dc-a", {"H100-SXM": 4, "A100-80G-SXM": 4})], rps=1.0))
    lines = idle_reasons(problem, plan)
    assert lines and all("price: the offered load is served" in x for x in lines), lines
    used = {p.chip for p in plan.pools if p.count > 0}
    fully_idle = [x for x in lines if re.match(r"(\d+) of \1 ", x)]
    assert fully_idle and all(any(f"{c} is cheaper" in x for c in used) for x in fully_idle), lines
