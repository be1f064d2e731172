"""The MILP: each constraint family on a micro-instance, validate(), backends, brute force."""

import copy
import dataclasses
import itertools

import pytest

from placer.errors import InfeasiblePlanError
from placer.ilp.backends import Status, solve
from placer.ilp import dinkelbach, starts
from placer.ilp.dinkelbach import TARGET_GAP, solve_objective
from placer.ilp.formulation import build, pdd_architecture
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.validate import validate
from tests.placer.conftest import micro_dict
from tests.support import knapsack


def _problem(**changes):
    return resolve(parse_scenario(micro_dict(**changes)))


def _plan(problem, **kw):
    return optimize(problem, SolveConfig(marginals=False, time_limit_s=60, **kw))


def test_micro_plan_serves_the_load_and_passes_validate(micro_problem):
    plan = _plan(micro_problem)
    assert plan.metrics.served_rps == pytest.approx(6.0, rel=1e-5)
    assert plan.metrics.sla_attainment >= 0.9
    assert validate(micro_problem, plan) == []
    assert plan.solver.status == "optimal"
    roles = {p.role for p in plan.pools}
    assert "P" in roles and roles & {"MD", "RLD"}


def test_validate_catches_a_tampered_plan(micro_problem):
    plan = _plan(micro_problem)
    pools = [p.model_copy(update={"count": p.count + 50}) for p in plan.pools]
    issues = validate(micro_problem, plan.model_copy(update={"pools": pools}))
    assert any("inventory" in i for i in issues)
    assert any("cost" in i for i in issues)
    fewer = [p.model_copy(update={"count": 0 if p.role == "P" else p.count}) for p in plan.pools]
    issues = validate(micro_problem, plan.model_copy(update={"pools": fewer}))
    assert any("does not have" in i for i in issues)


def test_inventory_row_limits_instances_and_empty_hardware_is_infeasible():
    problem = _problem(datacenters=[{"name": "dc-a", "inventory": {"H100-SXM": 1}},
                                    {"name": "dc-b", "inventory": {"L40S": 1}}])
    with pytest.raises(InfeasiblePlanError, match="can carry at most"):
        _plan(problem)


def test_link_row_caps_cross_dc_traffic_and_zero_bandwidth_keeps_traffic_local():
    data = micro_dict(links=[{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 0.0, "rtt_ms": 20}])
    data["datacenters"] = [{"name": "dc-a", "inventory": {"H100-SXM": 4}}, {"name": "dc-b", "inventory": {"L40S": 8}}]
    plan = _plan(resolve(parse_scenario(data)))
    assert all(r.src == r.dst for r in plan.routes)
    assert plan.metrics.wan_gbit_per_s == 0.0
    data["links"][0]["gbit_per_s"] = 0.05  # a thin line: used, but never past its cap
    problem = resolve(parse_scenario(data))
    plan = _plan(problem)
    for link in plan.links:
        assert link.gbit_per_s_used <= problem.options.link_utilization_cap * 0.05 + 1e-9
    assert validate(problem, plan) == []


def test_power_row_binds():
    data = micro_dict()
    data["datacenters"] = [{"name": "dc-a", "inventory": {"H100-SXM": 4}, "power_kw": 0.5},
                           {"name": "dc-b", "inventory": {"L40S": 4}, "power_kw": 0.2}]
    with pytest.raises(InfeasiblePlanError):
        _plan(resolve(parse_scenario(data)))
    data["datacenters"][0]["power_kw"] = 1.5  # two H100s of the four
    data["datacenters"][1]["power_kw"] = 1.5
    data["workload"]["arrival_rps"] = 3.0
    problem = resolve(parse_scenario(data))
    plan = _plan(problem)
    used = sum(p.count * p.tp * problem.chips[p.chip].tdp_w for p in plan.pools if p.datacenter == "dc-a") / 1000
    assert used <= 1.5 + 1e-9
    assert validate(problem, plan) == []


def test_an_sla_no_chip_can_meet_is_infeasible_with_a_reason():
    with pytest.raises(InfeasiblePlanError, match="TPOT SLA of 0.0001 s"):
        _plan(_problem(sla={"ttft_p90_s": 2.0, "tpot_s": 0.0001}))
    with pytest.raises(InfeasiblePlanError, match="TTFT SLA of 0.001 s cannot be met"):
        _plan(_problem(sla={"ttft_p90_s": 0.001, "tpot_s": 0.05}))


def test_capacity_rows_hold_at_the_planned_caps(micro_problem):
    plan = _plan(micro_problem)
    form = build(micro_problem, pdd_architecture(micro_problem))
    for family in ("p_capacity", "decode_slots", "link", "inventory"):
        assert any(r.family == family for r in form.model.rows), family
    # (C4) and (C7) only where (C3) and (C6) do not imply them: tests/placer/ilp/test_columns.py
    assert validate(micro_problem, plan) == []


def test_filtered_class_may_finish_on_rld_and_no_other_may():
    problem = _problem()
    form = build(problem, pdd_architecture(problem))
    filtered = {problem.classes[f.k].name for f in form.flows if f.pipeline == "P-RLD"}
    assert filtered == {"odd"}


def test_ortools_and_pulp_reach_the_same_optimum(micro_problem):
    a = optimize(micro_problem, SolveConfig(backend="ortools", marginals=False))
    b = optimize(micro_problem, SolveConfig(backend="pulp", marginals=False))
    c = optimize(micro_problem, SolveConfig(backend="ortools-scip", marginals=False))
    assert a.metrics.cost_usd_per_h == pytest.approx(b.metrics.cost_usd_per_h)
    assert a.metrics.bcr_requests_per_usd == pytest.approx(b.metrics.bcr_requests_per_usd, rel=5e-3)
    assert a.metrics.bcr_requests_per_usd == pytest.approx(c.metrics.bcr_requests_per_usd, rel=5e-3)


@pytest.mark.parametrize("hint", [None, [2.0, 2.0, 1.5], [0.0, 0.0, 0.0], [9.0, 9.0, 9.0]],
                         ids=["cold", "optimal hint", "poor hint", "infeasible hint"])
def test_highs_milp_takes_a_hint_and_reaches_the_optimum_whatever_it_is(hint):
    """HiGHS MILPs go through MathOpt so that a Dinkelbach round starts from the last plan (pywraplp's
    HiGHS crashes on a hint); a poor or infeasible hint must not change the optimum."""
    res = solve(knapsack(), "ortools", 10, hint=hint)
    assert res.status is Status.OPTIMAL and res.backend == "ortools-highs"
    assert res.objective == pytest.approx(12.5) and res.values == pytest.approx([2.0, 2.0, 1.5])
    assert res.bound >= res.objective - 1e-9


def test_highs_milp_statuses_infeasible_and_out_of_time():
    m = knapsack()
    m.add("impossible", "r", {0: 1.0}, ">=", 5.0)  # a ≤ 4
    assert solve(m, "ortools", 10).status is Status.INFEASIBLE
    assert solve(knapsack(), "ortools", 0.0).status is Status.NO_SOLUTION  # no time even to hand it over


def test_min_cost_and_max_goodput_objectives():
    problem = _problem()
    cheap = optimize(problem, SolveConfig(objective="min-cost", marginals=False))
    best = optimize(problem, SolveConfig(objective="bcr", marginals=False))
    assert cheap.metrics.cost_usd_per_h <= best.metrics.cost_usd_per_h + 1e-9
    opts = problem.options.model_copy(update={"budget_usd_per_h": cheap.metrics.cost_usd_per_h})
    capped = optimize(dataclasses.replace(problem, options=opts), SolveConfig(objective="max-goodput", marginals=False))
    assert capped.metrics.cost_usd_per_h <= cheap.metrics.cost_usd_per_h + 1e-9


def _brute_force_ratio(problem):
    """Best goodput/cost over every integer assignment of instance counts and whole-instance queues (LP per assignment)."""
    form = build(problem, pdd_architecture(problem))
    ints = [v for v in form.model.vars if v.integer]
    inventory = [r for r in form.model.rows if r.family == "inventory"]
    best = 0.0
    for counts in itertools.product(*[range(int(v.ub) + 1) for v in ints]):
        chosen = {v.index: c for v, c in zip(ints, counts)}
        cost = sum(form.cost.get(i, 0.0) * c for i, c in chosen.items())  # a whole-instance queue (c_{p,t} ∈ ℤ) costs nothing itself
        if cost <= 0 or any(sum(c * chosen[i] for i, c in r.coeffs.items()) > r.rhs for r in inventory):
            continue
        m = copy.deepcopy(form.model).relaxed()
        for i, c in chosen.items():
            m.fix(i, c)
        m.maximize, m.objective = True, dict(form.goodput)
        res = solve(m, "ortools")
        if res.status.has_solution:
            best = max(best, res.objective / cost)
    return best


def _random_micro(seed):
    """A micro scenario small enough to enumerate: one or two H100s and L40Ss, a drawn load and line."""
    import random

    rng = random.Random(seed)
    data = micro_dict()
    data["datacenters"] = [{"name": "dc-a", "inventory": {"H100-SXM": rng.choice([2, 3])}},
                           {"name": "dc-b", "inventory": {"L40S": rng.choice([1, 2])}}]
    data["options"] = {"tp_degrees": [1], "filter_min_input_tokens": 8192}
    data["workload"]["arrival_rps"] = rng.choice([0.5, 1.0, 2.0])
    data["links"][0]["gbit_per_s"] = rng.choice([1.0, 10.0])
    return resolve(parse_scenario(data))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_optimum_equals_brute_force_enumeration(seed):
    problem = _random_micro(seed)
    brute = _brute_force_ratio(problem)
    form = build(problem, pdd_architecture(problem))
    if brute == 0.0:
        with pytest.raises(InfeasiblePlanError):
            solve_objective(form, SolveConfig())
        return
    outcome = solve_objective(form, SolveConfig())
    # the plan is within the gap it reports of the true optimum, and that gap within the 1 % asked
    assert outcome.mip_gap <= TARGET_GAP
    assert brute * (1 - outcome.mip_gap) * (1 - 1e-6) <= outcome.ratio <= brute * (1 + 1e-6)


def test_restricted_seed_is_a_plan_of_the_whole_model_and_keeps_the_optimum(monkeypatch):
    """Dinkelbach seeds from the pools of the sites the LP's cheapest plan uses: on a scenario with
    more chips than it needs the seed is taken, the plan breaks no row of the whole model, and the
    ratio agrees with a solve that seeds on the whole model within the gaps both report."""
    data = micro_dict()
    # eight sites: the LP's cheapest plan uses four (three without the heavy/light split), so the seed leaves half out
    data["datacenters"] = [{"name": "dc-a", "inventory": {"H100-SXM": 4, "A100-80G-SXM": 4, "H200-SXM": 4, "H800-SXM": 4}},
                           {"name": "dc-b", "inventory": {"L40S": 4, "H20": 4, "A100-80G-SXM": 4, "L20": 4}}]
    problem = resolve(parse_scenario(data))
    seeds = []
    real = dinkelbach._restricted_seed
    monkeypatch.setattr(dinkelbach, "_restricted_seed", lambda *a, **k: seeds.append(real(*a, **k)) or seeds[-1])
    form = build(problem, pdd_architecture(problem))
    seeded = solve_objective(form, SolveConfig())
    assert seeds and seeds[0] is not None, "the restricted seed was not taken on this scenario"
    assert form.model.violations(seeded.values) == []
    assert [v.ub for v in form.model.vars] == [v.ub for v in build(problem, pdd_architecture(problem)).model.vars]
    monkeypatch.setattr(dinkelbach, "RESTRICT_MIN_SHARE", 2.0)  # never restrict
    whole = solve_objective(build(problem, pdd_architecture(problem)), SolveConfig())
    assert seeded.ratio == pytest.approx(whole.ratio, rel=max(seeded.mip_gap, whole.mip_gap) + 1e-6)


def test_warm_start_reaches_the_same_optimum(micro_problem):
    cold = optimize(micro_problem, SolveConfig(marginals=False))
    warm = optimize(micro_problem, SolveConfig(marginals=False), warm_start=cold)
    assert warm.metrics.bcr_requests_per_usd == pytest.approx(cold.metrics.bcr_requests_per_usd, rel=5e-3)
    drifted = dataclasses.replace(micro_problem, arrival_rps=micro_problem.arrival_rps * 0.7)
    again = optimize(drifted, SolveConfig(marginals=False), warm_start=cold)
    fresh = optimize(drifted, SolveConfig(marginals=False))
    assert again.metrics.bcr_requests_per_usd == pytest.approx(fresh.metrics.bcr_requests_per_usd, rel=5e-3)


def test_aggregated_rows_exist_and_hold_on_a_plan_with_a_pools():
    """(C14)–(C16) are built for every A queue, and an A plan keeps its budget, slots and memory
    within the caps (validate re-checks them from the performance model)."""
    # 2 req/s: one A instance carries it all (at 6 req/s P + MD pools win by < 1 % of BCR since decode
    # pools reserve the final context, placer.kv_admission — the test is about the A rows, not that margin)
    problem = _problem(options={**micro_dict()["options"], "aggregated": True},
                       workload={**micro_dict()["workload"], "arrival_rps": 2.0})
    form = build(problem, pdd_architecture(problem))
    a_queues = [q for q in form.pools if q.role == "A"]
    assert a_queues
    for family in ("a_budget", "a_slots", "a_memory"):
        assert sum(r.family == family for r in form.model.rows) == len(a_queues)
    plan = _plan(problem)
    assert any(p.role == "A" for p in plan.pools)
    assert validate(problem, plan) == []


def test_token_prices_split_the_plan_cost_by_phase(micro_problem):
    """Output tokens carry the decode pools' cost, input tokens the P pools'; a cached prompt
    token costs less than an uncached one (only the new tokens' attention over it)."""
    plan = _plan(micro_problem)
    m = plan.metrics
    decode_usd_per_h = sum(p.count * p.tp * micro_problem.chips[p.chip].price_usd_per_h
                           for p in plan.pools if p.role != "P")
    out_tokens_per_s = sum(r.rps * next(c.output_tokens for c in micro_problem.classes if c.name == r.request_class)
                           for r in plan.routes)
    assert m.usd_per_million_output_tokens == pytest.approx(decode_usd_per_h / (out_tokens_per_s * 3600) * 1e6)
    assert 0 < m.usd_per_million_cached_input_tokens < m.usd_per_million_input_tokens
    prices = [m.usd_per_million_input_tokens, m.usd_per_million_cached_input_tokens, m.usd_per_million_output_tokens]
    assert all(p is not None and p > 0 for p in prices)


def test_no_cached_tokens_no_cached_price():
    classes = [{"name": "cold", "share": 1.0, "input_tokens": 4096, "output_tokens": 256, "hit_rate": 0.0}]
    problem = _problem(workload={"arrival_rps": 2.0, "classes": classes})
    plan = _plan(problem)
    assert plan.metrics.usd_per_million_cached_input_tokens is None
    assert "usd_per_million_cached_input_tokens" not in plan.to_json()


def test_quiet_stdout_from_many_threads_at_once_restores_stdout(capfd, monkeypatch):
    """Solver chatter is silenced while any solve is inside quiet_stdout, and fd 1 is the user's
    again once the last one leaves, in whatever order threads enter and leave."""
    import os
    import sys
    import threading
    import time

    from placer.ilp.backends import quiet_stdout

    monkeypatch.setattr(sys, "stdout", sys.__stdout__)  # a stream on fd 1 (capfd captures fd 1 itself)

    def chatter(delay_s: float) -> None:
        with quiet_stdout():
            time.sleep(delay_s)
            os.write(1, b"solver chatter\n")

    threads = [threading.Thread(target=chatter, args=(0.01 * (i % 3),)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.write(1, b"the user's line\n")
    assert capfd.readouterr().out == "the user's line\n"


def test_pools_and_flows_hash_once_and_pickle_without_their_hash():
    """Pools and flows cache their hash (the build looks them up ~350 000 times on eight-dc); a string's
    hash differs between processes, so a pickle (Ray, multiprocessing) must not carry it."""
    import pickle

    from placer.ilp.data import Flow, Pool

    pool = Pool("P", "dc-a", "H100-SXM", 8, 0.5, "mix")
    flow = Flow(0, "P-MD", pool, "dc-b")
    assert hash(flow) == hash(Flow(0, "P-MD", Pool("P", "dc-a", "H100-SXM", 8, 0.5, "mix"), "dc-b"))
    assert "_hash" in flow.__dict__ and "_hash" in pool.__dict__
    copy_ = pickle.loads(pickle.dumps(flow))
    assert "_hash" not in copy_.__dict__ and "_hash" not in copy_.p.__dict__
    assert copy_ == flow and hash(copy_) == hash(flow)
    assert dataclasses.replace(pool, util=0.3) != pool


def test_a_marginal_re_solve_starts_from_the_plan_and_keeps_the_optimum(micro_problem, monkeypatch):
    """One more chip keeps the plan feasible, so the re-solve starts from it (matched by variable
    name; no LP bound, no seed MILP) and ends at the ratio a cold solve finds, within the gaps; a
    start that breaks a row is ignored."""
    form = build(micro_problem, pdd_architecture(micro_problem))
    outcome = solve_objective(form, SolveConfig())
    start = {v.name: x for v, x in zip(form.model.vars, outcome.values)}
    dcs = tuple(dataclasses.replace(dc, inventory={c: n + 1 for c, n in dc.inventory.items()})
                for dc in micro_problem.datacenters)
    looser = dataclasses.replace(micro_problem, datacenters=dcs)
    lps = []
    real_bound = starts._lp_ratio_bound
    monkeypatch.setattr(starts, "_lp_ratio_bound", lambda *a: lps.append(1) or real_bound(*a))
    warm = solve_objective(build(looser, pdd_architecture(looser)), SolveConfig(), feasible_start=start)
    assert lps == [], "the re-solve from the plan should need no LP bound"
    cold = solve_objective(build(looser, pdd_architecture(looser)), SolveConfig())
    assert warm.ratio >= outcome.ratio * (1 - 1e-9)  # from below: never worse than the plan it loosens
    assert warm.ratio == pytest.approx(cold.ratio, rel=max(warm.mip_gap, cold.mip_gap) + 1e-6)
    broken = {name: 10 * x for name, x in start.items()}  # ten times the instances: past the inventory
    assert dinkelbach._feasible_start(build(looser, pdd_architecture(looser)), broken) is None
    assert dinkelbach._feasible_start(build(looser, pdd_architecture(looser)), start) is not None


def test_a_marginal_smaller_than_the_solver_gap_says_so():
    """Each BCR is proven only within its reported gap, so a marginal inside the larger gap has no sign
    (eight-dc printed "+16 MI300X chips: BCR -1.138 req/USD (-0.1 %)" for more hardware); the text
    says so, and a marginal beyond it reads as before."""
    from types import SimpleNamespace

    from placer.marginals import priced as _priced

    def plan(bcr, gap):
        return SimpleNamespace(metrics=SimpleNamespace(bcr_requests_per_usd=bcr), solver=SimpleNamespace(mip_gap=gap))

    def marginal(new_bcr):
        resolved = _priced(["row"], lambda row: (None, "+1 unit"), lambda other, cfg: plan(new_bcr, 0.0071),
                           plan(1000.0, 0.0074), SolveConfig(time_limit_s=60), "BCR")
        return resolved[0].marginal

    assert marginal(998.9) == "+1 unit: BCR -1.100 req/USD (-0.1 %), within the solver's ±0.7 % precision"
    assert marginal(1100.0) == "+1 unit: BCR +100.000 req/USD (+10.0 %)"
