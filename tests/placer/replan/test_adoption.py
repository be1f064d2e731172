"""The adoption rule in its one home: the jobs' policy and the simulated loop decide alike."""

from __future__ import annotations

import pytest

from placer.plan import Metrics, Plan, PoolOut
from placer.replan import AdoptionRule, Verdict, adopt


def plan(bcr: float, served: float = 4.0) -> Plan:
    return Plan(scenario="s", pools=[PoolOut(role="P", datacenter="a", chip="H100-SXM", tp=1, count=1)],
                metrics=Metrics(bcr_requests_per_usd=bcr, served_rps=served, offered_rps=4.0))


def run(rule=AdoptionRule(), baseline=plan(100.0), candidate=plan(110.0), pool_changes=2, since=None):
    return adopt(rule, has_current=True, baseline=baseline, candidate=candidate, pool_changes=pool_changes,
                 offered_rps=4.0, since_adoption_s=since)


def test_a_gain_under_the_hysteresis_is_not_adopted():
    got = run(AdoptionRule(min_bcr_gain_pct=15.0))
    assert got.verdict == Verdict.UNCHANGED and not got.adopts


def test_a_gain_over_the_hysteresis_is_adopted_in_apply_mode():
    got = run(AdoptionRule(min_bcr_gain_pct=5.0))
    assert got.verdict == Verdict.ADOPTED and got.adopts and got.gain_pct == pytest.approx(10.0)


def test_a_plan_that_cannot_carry_the_load_is_replaced_whatever_the_bcr():
    got = run(AdoptionRule(min_bcr_gain_pct=50.0), baseline=plan(200.0, served=2.0), candidate=plan(100.0))
    assert got.adopts and "carries only" in got.reason


def test_the_cool_down_holds_a_change_back():
    got = run(AdoptionRule(min_bcr_gain_pct=5.0, cooldown_s=3600.0), since=600.0)
    assert got.verdict == Verdict.HELD and not got.adopts


def test_the_jobs_policy_decides_as_the_library_rule():
    from datetime import datetime, timedelta, timezone

    from placer.service.jobs.policy import decide
    from placer.service.jobs.specs import Policy

    now = datetime(2026, 12, 5, tzinfo=timezone.utc)
    for gain_pct, cooldown, since in ((3.0, 0.0, None), (10.0, 0.0, None), (10.0, 3600.0, 60.0)):
        policy = Policy(mode="apply", min_bcr_gain_pct=gain_pct, cooldown_s=cooldown)
        job = decide(policy, has_current=True, baseline=plan(100.0), candidate=plan(108.0), pool_changes=1,
                     offered_rps=4.0, now=now,
                     last_adopted_at=None if since is None else now - timedelta(seconds=since))
        lib = adopt(AdoptionRule(min_bcr_gain_pct=gain_pct, cooldown_s=cooldown), has_current=True,
                    baseline=plan(100.0), candidate=plan(108.0), pool_changes=1, offered_rps=4.0,
                    since_adoption_s=since)
        assert (job.outcome.value, job.reason) == (lib.verdict.value, lib.reason)
