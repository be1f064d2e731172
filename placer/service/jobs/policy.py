"""The adoption rule of a replanning run: does the new plan replace the current one?

in:  the job's :class:`~placer.service.jobs.specs.Policy`, the current plan evaluated under the new
     workload (the baseline), the newly solved plan, their diff, the last adoption time
out: :class:`Decision` (an outcome and the reason in words)

Hysteresis: the new plan must beat the *current plan re-evaluated under the same
workload* by ``min_bcr_gain_pct``. For two plans A and B under one workload, "B beats A
by x %" and "A beats B by x %" cannot both hold when x > 0, so a steady workload never
flips between two plans; the cool-down adds a minimum time between adoptions. A gain no larger
than the new plan's proven optimality gap (``solver.mip_gap``: the solver stopped within it of
the best BCR) is not a proven gain — the current plan may be as good — so the threshold is at
least that gap. A current
plan that can no longer carry the offered load is replaced whatever the BCR says
(a plan dropping requests can show a fine ratio on the requests it keeps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from db.models import RunOutcome
from placer.plan import Plan
from placer.service.jobs.specs import Policy

#: Served below this fraction of the offered load counts as "cannot carry the load".
CARRY_TOLERANCE = 0.01


@dataclass(frozen=True)
class Decision:
    outcome: RunOutcome
    reason: str
    gain_pct: float | None = None


def bcr_gain_pct(baseline_bcr: float, new_bcr: float) -> float:
    if baseline_bcr > 0:
        return 100.0 * (new_bcr - baseline_bcr) / baseline_bcr
    return math.inf if new_bcr > 0 else 0.0


def _carries(plan: Plan, offered_rps: float) -> bool:
    return plan.metrics.served_rps >= (1.0 - CARRY_TOLERANCE) * offered_rps


def decide(policy: Policy, *, has_current: bool, baseline: Plan | None, candidate: Plan, pool_changes: int,
           offered_rps: float, last_adopted_at: datetime | None, now: datetime) -> Decision:
    """Apply the job's policy. ``baseline`` is None when the current plan cannot run the
    new workload at all (its pools no longer exist, or cannot carry its routes)."""
    if not has_current:
        return Decision(RunOutcome.INITIAL, "the job had no current plan; this plan becomes it")
    if pool_changes == 0:
        return Decision(RunOutcome.UNCHANGED, "the new plan keeps every pool of the current plan",
                        bcr_gain_pct(baseline.metrics.bcr_requests_per_usd if baseline else 0.0,
                                     candidate.metrics.bcr_requests_per_usd))
    new_bcr = candidate.metrics.bcr_requests_per_usd
    if baseline is None:
        gain, forced = math.inf, "the current plan cannot run the new workload"
    else:
        gain = bcr_gain_pct(baseline.metrics.bcr_requests_per_usd, new_bcr)
        forced = None
        if not _carries(baseline, offered_rps) and _carries(candidate, offered_rps):
            forced = (f"the current plan carries only {baseline.metrics.served_rps:.3g} of "
                      f"{offered_rps:.3g} req/s offered")
    shown = None if math.isinf(gain) else gain
    if forced is None and gain < policy.min_bcr_gain_pct:
        return Decision(RunOutcome.UNCHANGED,
                        f"BCR gain {gain:+.2f} % is below the threshold of {policy.min_bcr_gain_pct:g} %", shown)
    gap_pct = 100.0 * max(candidate.solver.mip_gap, 0.0)
    if forced is None and gain <= gap_pct:
        return Decision(RunOutcome.UNCHANGED, f"BCR gain {gain:+.2f} % is within the solver's proven gap of "
                        f"{gap_pct:.2f} %: not a proven gain over the current plan", shown)
    why = forced or f"BCR gain {gain:+.2f} % clears the threshold of {policy.min_bcr_gain_pct:g} %"
    if policy.max_pool_changes is not None and pool_changes > policy.max_pool_changes:
        return Decision(RunOutcome.HELD, f"{why}, but it changes {pool_changes} pools and the policy allows "
                        f"{policy.max_pool_changes}", shown)
    if policy.cooldown_s > 0 and last_adopted_at is not None:
        since = (now - last_adopted_at).total_seconds()
        if since < policy.cooldown_s:
            return Decision(RunOutcome.HELD, f"{why}, but the last adoption was {since:.0f} s ago and the "
                            f"cool-down is {policy.cooldown_s:g} s", shown)
    if policy.mode == "apply":
        return Decision(RunOutcome.ADOPTED, f"{why}; adopted and a deployment requested", shown)
    return Decision(RunOutcome.PROPOSED, f"{why}; proposed for adoption", shown)
