"""The adoption rule of replanning: does a newly solved plan replace the current one?

in:  an :class:`AdoptionRule` (threshold, pool-change limit, cool-down, mode), the current plan
     evaluated under the new workload (the baseline), the newly solved plan, how many pools change,
     the offered load, the seconds since the last adoption
out: :class:`Verdict` and the reason in words (:class:`Adoption`)

One rule, one home: the replanning jobs (``placer.service.jobs.policy``, which maps the verdict to
the database's ``RunOutcome``) and the simulated replanning loop (:mod:`placer.replan.loop`) both
call :func:`adopt`. Standard library and ``placer.plan`` only.

Hysteresis: the new plan must beat the *current plan re-evaluated under the same workload* by
``min_bcr_gain_pct``. For two plans A and B under one workload, "B beats A by x %" and "A beats B
by x %" cannot both hold when x > 0, so a steady workload never flips between two plans; the
cool-down adds a minimum time between adoptions. A gain no larger than the new plan's proven
optimality gap (``solver.mip_gap``) is not a proven gain, so the threshold is at least that gap.
A current plan that can no longer carry the offered load is replaced whatever the BCR says (a plan
dropping requests can show a fine ratio on the requests it keeps).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from placer.plan import Plan

#: Served below this fraction of the offered load counts as "cannot carry the load".
CARRY_TOLERANCE = 0.01


class Verdict(str, enum.Enum):
    """What the rule decides (the values are the job runs' ``RunOutcome`` names)."""

    INITIAL = "INITIAL"  # no current plan: this one becomes it
    ADOPTED = "ADOPTED"  # mode apply: the gain clears the threshold
    PROPOSED = "PROPOSED"  # mode propose: the gain clears the threshold; waits for a user
    UNCHANGED = "UNCHANGED"  # the gain does not clear the threshold
    HELD = "HELD"  # it clears it, but the cool-down or the pool-change limit holds it back


@dataclass(frozen=True)
class AdoptionRule:
    """The job's hysteresis settings (a job's ``Policy`` carries the same fields)."""

    min_bcr_gain_pct: float = 5.0
    max_pool_changes: int | None = None
    cooldown_s: float = 0.0
    mode: str = "apply"  # "propose" | "apply"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.min_bcr_gain_pct) and self.min_bcr_gain_pct >= 0):
            raise ValueError(f"min_bcr_gain_pct must be a finite number >= 0, got {self.min_bcr_gain_pct}")
        if not (math.isfinite(self.cooldown_s) and self.cooldown_s >= 0):
            raise ValueError(f"cooldown_s must be a finite number >= 0, got {self.cooldown_s}")
        if self.mode not in ("propose", "apply"):
            raise ValueError(f"mode must be 'propose' or 'apply', got {self.mode!r}")


@dataclass(frozen=True)
class Adoption:
    verdict: Verdict
    reason: str
    gain_pct: float | None = None

    @property
    def adopts(self) -> bool:
        """The new plan becomes the current one (INITIAL or ADOPTED)."""
        return self.verdict in (Verdict.INITIAL, Verdict.ADOPTED)


def bcr_gain_pct(baseline_bcr: float, new_bcr: float) -> float:
    if baseline_bcr > 0:
        return 100.0 * (new_bcr - baseline_bcr) / baseline_bcr
    return math.inf if new_bcr > 0 else 0.0


def carries(plan: Plan, offered_rps: float) -> bool:
    return plan.metrics.served_rps >= (1.0 - CARRY_TOLERANCE) * offered_rps


def adopt(rule: AdoptionRule, *, has_current: bool, baseline: Plan | None, candidate: Plan, pool_changes: int,
          offered_rps: float, since_adoption_s: float | None) -> Adoption:
    """Apply the rule. ``baseline`` is None when the current plan cannot run the new workload at all;
    ``since_adoption_s`` is None when nothing was adopted yet."""
    if not has_current:
        return Adoption(Verdict.INITIAL, "the job had no current plan; this plan becomes it")
    if pool_changes == 0:
        return Adoption(Verdict.UNCHANGED, "the new plan keeps every pool of the current plan",
                        bcr_gain_pct(baseline.metrics.bcr_requests_per_usd if baseline else 0.0,
                                     candidate.metrics.bcr_requests_per_usd))
    new_bcr = candidate.metrics.bcr_requests_per_usd
    if baseline is None:
        gain, forced = math.inf, "the current plan cannot run the new workload"
    else:
        gain = bcr_gain_pct(baseline.metrics.bcr_requests_per_usd, new_bcr)
        forced = None
        if not carries(baseline, offered_rps) and carries(candidate, offered_rps):
            forced = (f"the current plan carries only {baseline.metrics.served_rps:.3g} of "
                      f"{offered_rps:.3g} req/s offered")
    shown = None if math.isinf(gain) else gain
    if forced is None and gain < rule.min_bcr_gain_pct:
        return Adoption(Verdict.UNCHANGED,
                        f"BCR gain {gain:+.2f} % is below the threshold of {rule.min_bcr_gain_pct:g} %", shown)
    gap_pct = 100.0 * max(candidate.solver.mip_gap, 0.0)
    if forced is None and gain <= gap_pct:
        return Adoption(Verdict.UNCHANGED, f"BCR gain {gain:+.2f} % is within the solver's proven gap of "
                        f"{gap_pct:.2f} %: not a proven gain over the current plan", shown)
    why = forced or f"BCR gain {gain:+.2f} % clears the threshold of {rule.min_bcr_gain_pct:g} %"
    if rule.max_pool_changes is not None and pool_changes > rule.max_pool_changes:
        return Adoption(Verdict.HELD, f"{why}, but it changes {pool_changes} pools and the policy allows "
                        f"{rule.max_pool_changes}", shown)
    if rule.cooldown_s > 0 and since_adoption_s is not None and since_adoption_s < rule.cooldown_s:
        return Adoption(Verdict.HELD, f"{why}, but the last adoption was {since_adoption_s:.0f} s ago and the "
                        f"cool-down is {rule.cooldown_s:g} s", shown)
    if rule.mode == "apply":
        return Adoption(Verdict.ADOPTED, f"{why}; adopted and a deployment requested", shown)
    return Adoption(Verdict.PROPOSED, f"{why}; proposed for adoption", shown)
