"""The adoption rule of a replanning run: does the new plan replace the current one?

in:  the job's :class:`~placer.service.jobs.specs.Policy`, the current plan evaluated under the new
     workload (the baseline), the newly solved plan, their diff, the last adoption time
out: :class:`Decision` (an outcome and the reason in words)

The rule itself (hysteresis against the current plan re-evaluated under the new workload, a gain
at least the solver's proven gap, the pool-change limit, the cool-down, replace-if-cannot-carry)
lives in :func:`placer.replan.adoption.adopt`, which the simulated replanning loop calls too; this
module maps the job's ``Policy`` onto it and its verdict onto the database's ``RunOutcome``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from db.models import RunOutcome
from placer.plan import Plan
from placer.replan.adoption import CARRY_TOLERANCE, AdoptionRule, adopt, bcr_gain_pct
from placer.service.jobs.specs import Policy

__all__ = ["CARRY_TOLERANCE", "Decision", "bcr_gain_pct", "decide", "rule_of"]


@dataclass(frozen=True)
class Decision:
    outcome: RunOutcome
    reason: str
    gain_pct: float | None = None


def rule_of(policy: Policy) -> AdoptionRule:
    """The adoption rule a job's policy sets."""
    return AdoptionRule(min_bcr_gain_pct=policy.min_bcr_gain_pct, max_pool_changes=policy.max_pool_changes,
                        cooldown_s=policy.cooldown_s, mode=policy.mode)


def decide(policy: Policy, *, has_current: bool, baseline: Plan | None, candidate: Plan, pool_changes: int,
           offered_rps: float, last_adopted_at: datetime | None, now: datetime) -> Decision:
    """Apply the job's policy. ``baseline`` is None when the current plan cannot run the
    new workload at all (its pools no longer exist, or cannot carry its routes)."""
    since = None if last_adopted_at is None else (now - last_adopted_at).total_seconds()
    got = adopt(rule_of(policy), has_current=has_current, baseline=baseline, candidate=candidate,
                pool_changes=pool_changes, offered_rps=offered_rps, since_adoption_s=since)
    return Decision(RunOutcome(got.verdict.value), got.reason, got.gain_pct)
