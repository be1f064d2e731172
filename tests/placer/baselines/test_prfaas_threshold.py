"""PrfaaS's threshold is enforced, not just reported (issue 45's last rule): prompts with at least θ
uncached tokens are prefilled remotely, the rest locally, each class wholly on one side, θ optimised."""

from __future__ import annotations

import copy
import itertools

import pytest

from bench.agreement_cases import small_pdd_dict
from bench.random_scenarios import random_scenario
from placer.baselines import solve_baseline
from placer.errors import InfeasiblePlanError
from placer.flows import instance
from placer.ilp.formulation import Architecture
from placer.optimize import SolveConfig, solve_architecture
from placer.p_queues import queue_wait_law, set_wait_law
from placer.pdd import MIX, P_MD
from placer.problem import resolve
from placer.specs import parse_scenario
from placer.validate import validate
from tests.placer.baselines.test_prfaas_vs_pdd import PRFAAS_WINS
from tests.placer.conftest import micro_dict

CONFIG = SolveConfig(time_limit_s=10.0, marginals=False)

#: PRFAAS_WINS with a third, middle class and more load: three classes, so four thresholds per local
#: datacenter; dc-a's 8 H100s cannot prefill all 20 req/s, so the split matters.
THREE = copy.deepcopy(PRFAAS_WINS)
THREE["workload"]["arrival_rps"] = 20.0
THREE["workload"]["classes"] = [
    {"name": "long-cold", "share": 0.25, "input_tokens": 16384, "output_tokens": 256, "hit_rate": 0.2},
    {"name": "mid", "share": 0.15, "input_tokens": 8192, "output_tokens": 256, "hit_rate": 0.5},
    {"name": "short-warm", "share": 0.6, "input_tokens": 4096, "output_tokens": 512, "hit_rate": 0.9}]


def _uncached(problem) -> dict[str, int]:
    return {c.name: round((1 - c.hit_rate) * c.input_tokens) for c in problem.classes}


def check_one_threshold(problem, plan, sla: bool = True) -> None:
    """Every class wholly local or wholly remote, the remote ones exactly those at or above the plan's
    θ, decode in one local datacenter, each set queue's classes in proportion, and validate() clean
    (``sla`` False: but for its SLA line — validate prices P queues by the packed law the MILP does not
    use, and rnd-7-7's local-only plan reads 10.2 % late there, as it did before set queues existed)."""
    info = plan.model_extra["baseline"]
    local = {p.datacenter for p in plan.pools if p.count > 0 and p.role != "P"}
    assert len(local) == 1 and info["local"] == next(iter(local))
    remote, total = {}, {}
    for r in plan.routes:
        total[r.request_class] = total.get(r.request_class, 0.0) + r.rps
        remote[r.request_class] = remote.get(r.request_class, 0.0) + (r.rps if r.src != r.dst else 0.0)
    for name, rps in total.items():
        assert remote[name] in (pytest.approx(0.0, abs=1e-6), pytest.approx(rps, rel=1e-6)), name  # one side
    theta = info.get("threshold_uncached_tokens")  # absent: nothing remote
    uncached = _uncached(problem)
    sent = {n for n in total if remote[n] > 1e-6}
    assert sent == ({n for n in total if uncached[n] >= theta} if theta is not None else set())
    shares = {c.name: c.share for c in problem.classes}
    queues: dict[tuple, dict[str, float]] = {}
    for a in plan.assignments:
        if a.role == "P" and "/set:" in (a.queue or ""):
            admitted = a.queue.split("/set:", 1)[1].split("+")
            assert a.request_class in admitted
            queue = queues.setdefault((a.datacenter, a.chip, a.tp, a.queue), {})
            queue[a.request_class] = queue.get(a.request_class, 0.0) + a.rps
    for rates in queues.values():  # (C13) over the subset: the classes in proportion among themselves
        first = next(iter(rates))
        for name, rps in rates.items():
            assert rps / rates[first] == pytest.approx(shares[name] / shares[first], rel=1e-4)
    assert [issue for issue in validate(problem, plan) if sla or not issue.startswith("SLA:")] == []


@pytest.mark.parametrize("data", [
    micro_dict(), PRFAAS_WINS, THREE, small_pdd_dict(),
    *(random_scenario(7, i) for i in (0, 2, 7, 8)),  # catalog scenarios: mixed (7-8 datacenters) and relay
], ids=["micro", "prfaas-wins", "three", "small-pdd", "rnd-7-0", "rnd-7-2", "rnd-7-7", "rnd-7-8"])
def test_prfaas_routes_obey_one_threshold_on_every_scenario(data):
    problem = resolve(parse_scenario(data))
    check_one_threshold(problem, solve_baseline(problem, "prfaas", CONFIG), sla=not data["name"].startswith("rnd"))


def test_the_optimised_threshold_equals_a_brute_force_over_every_split_of_the_classes():
    """Every (local datacenter, subset of classes sent remotely) posed by hand — 2 × 2³ MILPs, the
    non-threshold splits too: the baseline's plan is the best threshold split's, and its θ that split's.
    Here a split that is no threshold (long-cold and short-warm remote, mid local) would carry a higher
    BCR: the baseline keeps PrfaaS's rule rather than the best split."""
    problem = resolve(parse_scenario(THREE))
    everyone = frozenset(range(len(problem.classes)))
    uncached = list(_uncached(problem).values())
    best: dict[bool, tuple[float, frozenset]] = {}  # is a threshold split -> (BCR, remote classes)
    for local, remote in (("dc-a", "dc-b"), ("dc-b", "dc-a")):
        for size in range(len(everyone) + 1):
            for sent in map(frozenset, itertools.combinations(sorted(everyone), size)):
                kept = everyone - sent
                sides = [(local, kept)] * bool(kept) + [(remote, sent)] * bool(sent)
                arch = Architecture("brute", (P_MD,), drc=problem.options.drc, decode_dcs=frozenset({local}),
                                    p_dcs=frozenset(dc for dc, _ in sides),
                                    p_admits=tuple((dc, ks) for dc, ks in sides if ks != everyone))
                try:
                    plan, _, _ = solve_architecture(problem, arch, CONFIG)
                except InfeasiblePlanError:
                    continue
                threshold = all(uncached[k] > uncached[j] for k in sent for j in kept)
                bcr = plan.metrics.bcr_requests_per_usd
                if bcr > best.get(threshold, (0.0, None))[0]:
                    best[threshold] = (bcr, sent)
    plan = solve_baseline(problem, "prfaas", CONFIG)
    bcr, sent = best[True]
    assert plan.metrics.bcr_requests_per_usd == pytest.approx(bcr, rel=1e-3)
    assert plan.model_extra["baseline"]["threshold_uncached_tokens"] == min(uncached[k] for k in sent)
    assert sent == {k for k, c in enumerate(problem.classes) if c.name == "long-cold"}  # only the long, cold ones
    assert best[False][0] > bcr  # the free split's optimum is not PrfaaS's
    check_one_threshold(problem, plan)


def test_a_set_queue_waits_as_its_own_classes_mix():
    """A set queue of every class is the mix queue; of one class, that class alone (its own moments)."""
    problem = resolve(parse_scenario(THREE))
    im = instance(problem, "H100-SXM", 1)
    whole, mix = set_wait_law(problem, im, 0.7, frozenset(range(3))), queue_wait_law(problem, im, 0.7, MIX)
    assert (whole.mean_s, whole.second_moment_s2) == pytest.approx((mix.mean_s, mix.second_moment_s2), rel=1e-12)
    alone = set_wait_law(problem, im, 0.7, frozenset({0}))
    prefill = im.prefill_s(problem.classes[0].input_tokens, problem.classes[0].hit_rate)
    assert (alone.mean_s, alone.second_moment_s2) == pytest.approx((prefill, prefill ** 2), rel=1e-12)
    assert alone.mean_wait_s > whole.mean_wait_s  # the long class alone waits behind long prefills only



@pytest.mark.parametrize("gbit", [100, 5])
def test_the_search_prunes_only_variants_that_cannot_win(gbit):
    """Every variant's ceiling (read off its group's relaxed model) is at least its MILP optimum, and a
    variant skipped as unable to carry the whole load has no plan at it — on a wide and a thin line."""
    from placer.baselines.policies import prfaas_groups
    from placer.baselines.threshold import _carries, _ceiling
    from placer.ilp.dinkelbach import solve_objective
    from placer.ilp.formulation import build
    data = copy.deepcopy(THREE)
    data["links"][0]["gbit_per_s"] = gbit
    problem = resolve(parse_scenario(data))
    skipped = 0
    for relaxed, variants in prfaas_groups(problem):
        form = build(problem, relaxed)
        for arch in variants:
            why = _carries(form, arch, problem.arrival_rps)
            try:
                outcome = solve_objective(build(problem, arch), CONFIG)
            except InfeasiblePlanError:
                skipped += bool(why)
                continue
            assert why is None, why  # it has a plan at the whole load: it must not be skipped
            assert outcome.ratio <= _ceiling(form, arch) * (1 + 1e-9)
    assert skipped >= (1 if gbit == 5 else 0)
