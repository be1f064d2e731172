"""The serving config: every policy of the router, built once from the plan and the options.

In: a plan (`placer.plan.Plan`), optionally its scenario, and the serving options of
the command line (or a test). Out: a frozen `ServingConfig` — routing, handoff,
admission, the WAN lines, where the router sits, and the router's deadlines — that
the router, the in-process cluster, the Ray deployment and `--dry-run` take whole
(after nano-vllm's `Config`). No torch, no ray, no I/O at construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from executor.admission import AdmissionPolicy
from executor.handoff import HandoffPolicy
from executor.placement import front_datacenter, link_shapes
from executor.routing import RoutingPolicy
from executor.transport.shaping import LinkShape
from placer.plancheck import check_plan

if TYPE_CHECKING:
    from placer.plan import Plan
    from placer.specs import Scenario


@dataclass(frozen=True)
class ServingConfig:
    """How a deployment serves: which pipeline, how RLD hands over, what it admits, how it watches.

    `heartbeat_s` None: no heartbeats (health then learns only from failed sends and
    `mark_down`); `router_datacenter` None: the datacenter of the first P instance.
    """

    routing: RoutingPolicy = field(default_factory=RoutingPolicy)
    handoff: HandoffPolicy = field(default_factory=HandoffPolicy)
    admission: AdmissionPolicy = field(default_factory=AdmissionPolicy)
    links: Mapping[frozenset[str], LinkShape] = field(default_factory=dict)  # datacenter pair → WAN line
    router_datacenter: str | None = None
    request_timeout_s: float = 120.0  # a request with no progress this long ends with an error
    lease_s: float = 30.0  # how long P keeps staged KV without progress
    heartbeat_s: float | None = 0.5
    stall_s: float = 30.0  # no progress this long: the attempt is treated as failed
    max_attempts: int = 4

    def __post_init__(self) -> None:
        for name in ("request_timeout_s", "lease_s", "stall_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.heartbeat_s is not None and not self.heartbeat_s > 0:
            raise ValueError(f"heartbeat_s must be > 0 or None, got {self.heartbeat_s}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")

    @classmethod
    def from_plan(cls, plan: Plan, scenario: Scenario | None = None, *, link_gbit_per_s: float | None = None,
                  link_rtt_ms: float | None = None, link_jitter_ms: float | None = None, link_loss: float = 0.0,
                  **overrides: Any) -> ServingConfig:
        """The config a plan implies: its pipelines and thresholds, its handoff block, its lines (the
        `link_*` options override every line), the router in its front datacenter; `overrides` win.
        With a scenario, the plan must fit it first (`placer.plancheck.check_plan`: its names,
        one row per pool, the inventory): InputError / InfeasiblePlanError otherwise."""
        if scenario is not None:
            check_plan(scenario, plan)
        built = {
            "routing": RoutingPolicy.from_plan(plan, scenario),
            "handoff": HandoffPolicy.from_plan(plan),
            "links": link_shapes(plan, scenario, gbit_per_s=link_gbit_per_s, rtt_ms=link_rtt_ms,
                                 jitter_ms=link_jitter_ms, loss=link_loss),
            "router_datacenter": front_datacenter(plan),
        }
        return cls(**{**built, **overrides})
