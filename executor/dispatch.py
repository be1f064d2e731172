"""Which instances serve one attempt of a request.

In: the registry (routable instances, their load and prefix indexes), the routing and
admission policies, the prompt and its output budget, the instances to avoid,
whether the attempt replaces a failed decoder (`prefer_relay`) and the request's
draw for the aggregated split (`routing.agg_draw`). Out: an `Assignment` — the
pipeline, P (or A), RLD and MD (or D), and the prefiller's predicted prefix hit — or
`NoCapacity` (nothing up can serve it) / `Overloaded` (everything that could is full).

Pipeline A first: an attempt goes to an A instance when the policy's share says so
(`RoutingPolicy.wants_aggregated`, the hit predicted on the best-matching prefiller),
or when A instances are up but no P (or no decoder for it) is; the A instance is
picked as P is. Its assignment holds only that instance (under `p`, role A). When
every A instance is full, a request the share sent to A spills to the
disaggregated side (if it can run).

Per attempt: P is chosen among the instances of the request's "set" queue where the plan has
such queues (`p_candidates`, `executor.set_queues`: whole instances per set, as the planner laid them
and the simulator sends each class; none of them up: any P, `Assignment.set_fallback`, counted by the
router as `set_fallbacks`; all of them full: `Overloaded`, the set's queue is what the plan sized), and
among those it is the one whose prefix index predicts the longest hit among those within
the load bound (`placer.prefix.pick_by_prefix`: consistent hashing with bounded loads, the
simulator's rule for MD too), then the least loaded; the pipeline comes from the
`RoutingPolicy` among those the live instances can run (a plan pipeline with no live
instance degrades to one that has, rather than refusing); RLD sits in P's datacenter
(least loaded); MD is chosen as P is. A retry that avoids a failed MD prefers P-RLD (the *fallback*).
SUSPECT instances are picked last, full ones never. No torch, no threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from executor.admission import AdmissionPolicy, NoCapacity, Overloaded
from executor.health import PeerState
from executor.registry import InstanceInfo, InstanceRegistry
from executor.routing import NoRouteError, Pipeline, RoutingPolicy
from placer import pdd
from placer.prefix import pick_by_prefix
#: A retry that avoids a failed decoder: the first of these the live instances can run.
_FALLBACK_ORDER = (Pipeline.P_RLD, Pipeline.P_MD, Pipeline.P_D, Pipeline.P_RLD_MD)
#: The policy's pipelines have no live instance: the first of these that has one.
_DEGRADE_ORDER = (Pipeline.P_RLD, Pipeline.P_MD, Pipeline.P_RLD_MD, Pipeline.P_D)
_ROLE_LABELS = {pdd.P: "prefill (P)", pdd.RLD: "relay decode (RLD)", pdd.MD: "main decode (MD)",
                pdd.AGG: "aggregated (A)"}


@dataclass(frozen=True)
class Assignment:
    """The instances of one attempt (`md` is the D of the PD baselines on P-D; on pipeline A `p` is
    the A instance and there is no other)."""

    pipeline: Pipeline
    p: InstanceInfo
    rld: InstanceInfo | None
    md: InstanceInfo | None
    est_hit_tokens: int
    degraded: bool = False  # the policy's pipelines had no live instance: another one serves it
    set_fallback: bool = False  # no P of the request's set queue was up: another P prefills it

    @property
    def instances(self) -> dict[str, str]:
        """Role → instance name (the decoder under `MD` also on P-D; the A instance under `A`)."""
        out = {self.p.role: self.p.name}
        if self.rld is not None:
            out[pdd.RLD] = self.rld.name
        if self.md is not None:
            out[pdd.MD] = self.md.name
        return out


def assign(registry: InstanceRegistry, routing: RoutingPolicy, admission: AdmissionPolicy, prompt: Sequence[int],
           max_new_tokens: int, *, exclude: set[str], prefer_relay: bool, draw: float = 1.0) -> Assignment:
    """Pick the pipeline and instances of one attempt (see the module doc)."""
    aggregated = _assign_aggregated(registry, routing, admission, prompt, max_new_tokens, exclude, draw)
    if aggregated is not None:
        return aggregated
    prefillers, set_fallback = p_candidates(registry, routing, prompt, exclude)
    p = pick(registry, admission, prefillers, prompt, role=pdd.P)
    est_hit = registry.indexes[p.name].match(prompt)
    avail = available_pipelines(registry, p, exclude)
    if not avail:
        raise NoCapacity(f"no decoder is up to serve a request with prefill on {p.name}")
    degraded = False
    if prefer_relay:
        pipeline = next(x for x in _FALLBACK_ORDER if x in avail)
    else:
        try:
            pipeline = routing.choose(len(prompt), est_hit, max_new_tokens, avail)
        except NoRouteError:  # the plan's pipelines lack a live instance: degrade, don't refuse
            pipeline, degraded = next(x for x in _DEGRADE_ORDER if x in avail), True
    rld = (pick(registry, admission, registry.by_role(pdd.RLD, p.datacenter, exclude), role=pdd.RLD)
           if pipeline.uses_relay else None)
    decoder_role = pdd.D if pipeline is Pipeline.P_D else pdd.MD
    md = (pick(registry, admission, registry.by_role(decoder_role, exclude=exclude), prompt, role=pdd.MD)
          if pipeline.uses_main else None)
    return Assignment(pipeline, p, rld, md, est_hit, degraded, set_fallback)


def p_candidates(registry: InstanceRegistry, routing: RoutingPolicy, prompt: Sequence[int],
                 exclude: set[str]) -> tuple[list[InstanceInfo], bool]:
    """The routable P instances that may prefill `prompt`: with the plan's set queues
    (`RoutingPolicy.set_queues`), those that admit its class — the class nearest to its prompt less the
    longest prefix hit predicted on a P — and whether none is up, so every P is offered (the fallback)."""
    ps = registry.by_role(pdd.P, exclude=exclude)
    sets = routing.set_queues
    if sets is None or not ps:
        return ps, False
    hit = max(registry.indexes[i.name].match(prompt) for i in ps)
    request_class = sets.request_class(len(prompt) - hit)
    within = [i for i in ps if sets.serves(i.name, request_class)]
    return (within, False) if within else (ps, True)


def _assign_aggregated(registry: InstanceRegistry, routing: RoutingPolicy, admission: AdmissionPolicy,
                       prompt: Sequence[int], max_new_tokens: int, exclude: set[str], draw: float) -> Assignment | None:
    """The attempt on pipeline A, or None when it goes disaggregated (see the module doc)."""
    aggs = registry.by_role(pdd.AGG, exclude=exclude)
    if not aggs:
        return None
    must = not _disaggregated_up(registry, exclude)  # nothing else can serve it
    if not must and not _share_says_a(registry, routing, prompt, max_new_tokens, exclude, draw):
        return None
    try:
        a = pick(registry, admission, aggs, prompt, role=pdd.AGG)
    except Overloaded:
        if must:
            raise
        return None  # every A is full: spill to the disaggregated side
    return Assignment(Pipeline.P_A, a, None, None, registry.indexes[a.name].match(prompt),
                      degraded=Pipeline.P_A not in routing.allowed)


def _disaggregated_up(registry: InstanceRegistry, exclude: set[str]) -> bool:
    """Whether some P is up with a decoder to serve its prefills."""
    return any(available_pipelines(registry, p, exclude) for p in registry.by_role(pdd.P, exclude=exclude))


def _share_says_a(registry: InstanceRegistry, routing: RoutingPolicy, prompt: Sequence[int], max_new_tokens: int,
                  exclude: set[str], draw: float) -> bool:
    """The policy's aggregated split for this request, at the hit predicted on the best-matching prefiller."""
    prefillers = registry.by_role(pdd.P, exclude=exclude) + registry.by_role(pdd.AGG, exclude=exclude)
    hit = max(registry.indexes[i.name].match(prompt) for i in prefillers)
    return routing.wants_aggregated(len(prompt), hit, max_new_tokens, draw)


def available_pipelines(registry: InstanceRegistry, p: InstanceInfo, exclude: set[str]) -> frozenset[Pipeline]:
    """The pipelines the routable instances (less `exclude`) can run with prefill on `p`."""
    out = set()
    has_rld = bool(registry.by_role(pdd.RLD, p.datacenter, exclude))
    if registry.by_role(pdd.MD, exclude=exclude):
        out.add(Pipeline.P_MD)
        if has_rld:
            out.add(Pipeline.P_RLD_MD)
    if has_rld:
        out.add(Pipeline.P_RLD)
    if registry.by_role(pdd.D, exclude=exclude):
        out.add(Pipeline.P_D)
    return frozenset(out)


def pick(registry: InstanceRegistry, admission: AdmissionPolicy, candidates: list[InstanceInfo],
         prompt: Sequence[int] | None = None, *, role: str = "") -> InstanceInfo:
    """SUSPECT instances last, full ones never (`Overloaded` if all are full); with a prompt, the longest
    predicted prefix hit among the instances within the load bound (`placer.prefix.pick_by_prefix`, the
    simulator's rule too), then name; without one, the least loaded, then name."""
    if not candidates:
        raise NoCapacity(f"no {_ROLE_LABELS.get(role, 'matching')} instance is up")
    room = [i for i in candidates if not admission.full(registry.load[i.name])]
    if not room:
        raise Overloaded(f"every {role} instance is at its limit of {admission.max_per_instance} requests",
                         admission.retry_after_s)

    healthy = [i for i in room if registry.health.state(i.name) is not PeerState.SUSPECT]
    among = sorted(healthy or room, key=lambda i: i.name)  # the first of equals: the smallest name
    if prompt is None:
        return min(among, key=lambda i: registry.load[i.name])
    return pick_by_prefix(among, lambda i: registry.indexes[i.name].match(prompt), lambda i: registry.load[i.name])
