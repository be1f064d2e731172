"""Which P instances may prefill a request: the plan's P queues laid on its instances.

In: a plan (`placer.plan.Plan`) and optionally its scenario. Out: `SetQueues` — the P instances that
may not take every class (PDD's heavy/light split and threshold cuts: 'set:<class>+…/u<tier>' on whole
instances, a "light" queue and the whole-instance mix tiers beside it;
`executor.placement.p_instance_classes`) with the classes each admits, and each class's uncached prompt
tokens; None when every P instance takes every class.

The planner promises that a queue's classes wait only on its own instances, so a short prompt never
waits behind a long one; the simulator sends each class's requests to its queue's instances. The
router does the same: a request's class is the plan's class nearest to its uncached tokens (its prompt
less the longest prefix hit the router predicts on a P instance; nearest in log ratio, as lengths
are compared), and its P is chosen among the instances that admit that class — or admit every class
(a pool whose rows name no queue, or whose queues take every class) — by prefix hit and load
(`executor.dispatch`). Classes' uncached tokens come from the plan's rows (`assignments[].uncached_tokens`),
else from the scenario's classes ((1 − hit rate) × input, rounded: the planner's `p_cuts.uncached_tokens`).
No torch, no ray.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from executor.placement import p_instance_classes
from placer import pdd


@dataclass(frozen=True)
class SetQueues:
    """The plan's set-queue instances and its classes' uncached prompt tokens."""

    admits: tuple[tuple[str, frozenset[str]], ...]  # P instance -> the classes its set queues admit
    classes: tuple[tuple[str, int], ...]  # class -> uncached prompt tokens (the classes the plan prefills on P)

    def __post_init__(self) -> None:
        if not self.classes:
            raise ValueError("classes must name at least one class with its uncached tokens")
        for name, tokens in self.classes:
            if tokens < 0:
                raise ValueError(f"classes: {name!r} has uncached tokens {tokens} < 0")

    @cached_property
    def _admits(self) -> dict[str, frozenset[str]]:
        return dict(self.admits)

    def request_class(self, uncached_tokens: int) -> str:
        """The class whose uncached tokens are nearest (log ratio) to a request's; ties: the first name."""
        u = math.log1p(max(0, uncached_tokens))
        return min(sorted(self.classes), key=lambda c: abs(math.log1p(c[1]) - u))[0]

    def serves(self, instance: str, request_class: str) -> bool:
        """Whether P instance `instance` may prefill a request of `request_class` (an instance of no set
        queue takes every class)."""
        classes = self._admits.get(instance)
        return classes is None or request_class in classes

    @classmethod
    def from_plan(cls, plan: Any, scenario: Any = None) -> SetQueues | None:
        """The plan's set queues (None: it has none, or no class's uncached tokens are known)."""
        admits = p_instance_classes(plan)
        if not admits:
            return None
        prefilled = {a.request_class for a in plan.assignments if a.role == pdd.P and a.rps > 0}
        tokens = {c.name: round((1 - c.hit_rate) * c.input_tokens)
                  for c in (getattr(getattr(scenario, "workload", None), "classes", None) or [])}
        tokens.update({a.request_class: a.uncached_tokens for a in plan.assignments
                       if getattr(a, "uncached_tokens", None) is not None})
        known = tuple(sorted((name, tokens[name]) for name in prefilled if name in tokens))
        return cls(tuple(sorted(admits.items())), known) if known else None


def follow_plan(deployment: Any, plan: Any) -> None:
    """After a live change to `plan` succeeded (`executor.elastic`): the deployment records it as running
    (where it keeps one) and its router dispatches by the new plan's P queues — its instances are the
    new plan's, named by its pools. `plan` None (specs that came from no plan): every P takes anything."""
    if hasattr(deployment, "plan"):
        deployment.plan = plan
    router = getattr(deployment, "router", None)
    config = getattr(router, "config", None)
    if config is not None and hasattr(config, "routing"):
        sets = SetQueues.from_plan(plan) if plan is not None else None
        router.config = replace(config, routing=replace(config.routing, set_queues=sets))
