"""TTFT as the executor streams it, P queues at any utilisation, the infeasibility reason,
and what the plan says about its pools (issue 14, parts 1, 2 and 8)."""

from __future__ import annotations

import copy

import pytest

from placer.errors import InfeasiblePlanError
from placer.ilp.formulation import build, pdd_architecture
from placer.optimize import SolveConfig, evaluate_plan, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.specs import parse_scenario

#: DistServe's quick-start setting: OPT-13B on one node of 4 A100-80G, inputs 256–1536
#: tokens, TTFT P90 200 ms, TPOT 100 ms (DistServe, OSDI '24). OPT-13B is given by its
#: config (40 layers, hidden 5120, 40 heads of 128, multi-head attention, 13 B params).
DISTSERVE = {
    "name": "distserve-opt13b",
    "model": {"name": "OPT-13B", "attn": "gqa", "layers": 40, "hidden": 5120, "q_heads": 40, "kv_heads": 40,
              "head_dim": 128, "params_total_b": 13.0, "params_active_b": 13.0},
    "kv_dtype": "bf16", "weight_dtype": "bf16",
    "datacenters": [{"name": "dc", "inventory": {"A100-80G-SXM": 4}}],
    "workload": {"arrival_rps": 3.6, "classes": [
        {"name": "in-256", "share": 0.34, "input_tokens": 256, "output_tokens": 128, "hit_rate": 0.0},
        {"name": "in-896", "share": 0.33, "input_tokens": 896, "output_tokens": 128, "hit_rate": 0.0},
        {"name": "in-1536", "share": 0.33, "input_tokens": 1536, "output_tokens": 128, "hit_rate": 0.0}]},
    "sla": {"ttft_p90_s": 0.2, "tpot_s": 0.1},
    "options": {"tp_degrees": [1, 2, 4]},
}
#: The old fixed tiers planned a P pool at no less than 0.45 × the 0.8 cap.
OLD_LOWEST_TIER = 0.45 * 0.8


def distserve(**changes):
    data = copy.deepcopy(DISTSERVE)
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(data.get(key), dict) else value
    return resolve(parse_scenario(data))


@pytest.fixture(scope="module")
def ds_problem():
    return distserve()


@pytest.fixture(scope="module")
def ds_plan(ds_problem):
    return optimize(ds_problem, SolveConfig(marginals=False))


def test_distserve_single_node_is_feasible_and_its_simulated_p90_meets_the_sla(ds_problem, ds_plan):
    """At 3.6 req/s (0.9 req/s/GPU, under the 1.09 DistServe's search finds) the plan is not at the
    SLA's edge; at 4 req/s it is (predicted P90 0.196 s, simulated 0.202–0.204 s: agreeing within
    10 %, but on either side of 200 ms), and there only `--verify` could say which."""
    assert ds_plan.metrics.served_rps == pytest.approx(3.6)
    assert sum(p.count * p.tp for p in ds_plan.pools) <= 4
    for seed in (3, 11):
        sim = simulate(ds_problem, ds_plan, SimConfig(requests=20_000, seed=seed))
        assert sim["ttft_p90_s"] <= ds_problem.ttft_p90_s, sim["ttft_p90_s"]
        assert sim["ttft_p90_s"] == pytest.approx(ds_plan.metrics.ttft_p90_s, rel=0.10)


def test_a_prefill_pool_near_the_sla_is_planned_lightly_loaded(ds_plan):
    """Its prefill of 1536 tokens takes half the TTFT budget: the tail needs a light P queue."""
    p_pools = [p for p in ds_plan.pools if p.role == "P"]
    assert p_pools and all(p.planned_utilization is not None for p in p_pools)
    assert min(p.planned_utilization for p in p_pools) < OLD_LOWEST_TIER


def test_plan_pools_carry_design_batch_and_planned_utilization(ds_problem, ds_plan):
    form = build(ds_problem, pdd_architecture(ds_problem))
    designs = {q.key: d.batch for q, d in form.decode.items()}
    for plan in (ds_plan, evaluate_plan(ds_problem, ds_plan)):
        for p in plan.pools:
            if p.role == "P":
                assert p.design_batch is None and 0 < p.planned_utilization <= ds_problem.options.utilization_cap
            else:
                assert p.planned_utilization is None
                assert p.design_batch == designs[p.key] >= 1
    as_json = ds_plan.to_json()
    assert '"design_batch"' in as_json and '"planned_utilization"' in as_json


def test_ttft_has_no_decode_step_the_first_decoder_streams_p_s_token_on_import(ds_problem):
    """Loosening TPOT lets decode batch more, but cannot change how soon the first token leaves."""
    form = build(ds_problem, pdd_architecture(ds_problem))
    loose = build(distserve(sla={"tpot_s": 1.0}), pdd_architecture(ds_problem))
    assert sorted(form.ttft_s.values()) == pytest.approx(sorted(loose.ttft_s.values()))
    for f, t in form.ttft_s.items():
        c = ds_problem.classes[f.k]
        prefill = form.instances[f.p].prefill_s(c.input_tokens, c.hit_rate)
        assert prefill < t < prefill + ds_problem.tpot_s  # + the KV's move by RDMA, well under one TPOT


def test_a_ttft_no_pool_can_reach_names_the_class_the_pool_and_its_fastest_ttft():
    with pytest.raises(InfeasiblePlanError) as err:
        optimize(distserve(sla={"ttft_p90_s": 0.09}), SolveConfig(marginals=False))
    message = str(err.value)
    assert "class in-1536" in message and "A100-80G-SXM" in message and "0.09 s" in message
    assert "WAN" not in message and "line" not in message


def test_queueing_that_binds_names_the_tightest_class_and_no_wan_without_lines():
    """At 12 req/s on DistServe's 4 A100s even the LP relaxation meets the SLA at 10.3 req/s at most: queueing
    binds. At 10 req/s the LP relaxation meets it with fractions of instances (0.7 of a tp4 P instance beside
    fractions of decoders): whole instances bind, and the message says so rather than blaming queueing."""
    with pytest.raises(InfeasiblePlanError) as err:
        optimize(distserve(workload={"arrival_rps": 12.0}), SolveConfig(marginals=False))
    message = str(err.value)
    assert "queueing at prefill" in message and "tightest class, in-1536" in message
    assert "at most 10.3 req/s can meet it" in message and "WAN" not in message
    with pytest.raises(InfeasiblePlanError) as err:
        optimize(distserve(workload={"arrival_rps": 10.0}), SolveConfig(marginals=False))
    message = str(err.value)
    assert "no plan of whole instances carries 10 req/s" in message and "P dc A100-80G-SXM tp4" in message


def test_the_evaluation_spreads_a_line_transfer_by_the_sizes_the_plan_sends_over_that_line():
    """A line's mean residual transfer E[S²]/(2E[S]) comes from the plan's own routes over it (req/s
    times each class's DRC-trimmed KV bytes); transfers within a datacenter add nothing."""
    from placer.evaluate import line_residuals_s
    from placer.plan import Plan, Route
    from tests.placer.conftest import micro_dict

    problem = resolve(parse_scenario(micro_dict()))
    hot, cold = problem.classes[0], problem.classes[1]
    plan = Plan(scenario="micro", pools=[], routes=[
        Route(request_class="hot", pipeline="P-MD", src="dc-a", dst="dc-b", rps=3.0),
        Route(request_class="cold", pipeline="P-MD", src="dc-a", dst="dc-b", rps=1.0),
        Route(request_class="cold", pipeline="P-MD", src="dc-b", dst="dc-b", rps=5.0)])
    rate = problem.links[("dc-a", "dc-b")].bytes_per_s
    assert problem.options.drc  # each transfer is the class's uncached KV
    s_hot, s_cold = ((1 - c.hit_rate) * c.input_tokens * problem.kv_bytes_per_token / rate for c in (hot, cold))
    expected = (3 * s_hot ** 2 + s_cold ** 2) / (2 * (3 * s_hot + s_cold))
    assert line_residuals_s(problem, plan, {c.name: c for c in problem.classes}) == {
        ("dc-a", "dc-b"): pytest.approx(expected)}
