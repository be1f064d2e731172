"""Where a plan's instances go: pools → named instances with datacenter and chip labels.

In: a plan (`placer.plan.Plan`), optionally its scenario (for link RTT and jitter).
Out: `InstanceSpec`s (one per instance, named `<role>-<dc>-<chip>-tp<tp>-<k>`; in a fleet plan
`<model>.<role>-…`, the spec carrying its `model`: two models' pools never share a name;
`plan_models` names the models a plan serves), the Ray
custom resources each needs (`dc:<name>`, `chip:<name>`), the resources a local
emulation gives each datacenter's node, and the WAN lines (`LinkShape`) between
datacenters. An A instance's spec carries its chunked-prefill size: the chunk its pool's
queues name in the plan (`assignments[].queue` ending in `/c<tokens>`; the largest when
they differ, as `placer.aggregated.plan_designs` plans the pool), else
:data:`DEFAULT_AGG_CHUNK_TOKENS`; `engine_config` applies it to the engine settings.
`p_instance_classes`: the P instances that may not take every class (a "set" queue's whole instances, a
"light" queue's, a mix tier's beside it) and the classes each admits — what the router's
`executor.set_queues` dispatches by.
A spec's `device` and `num_gpus` are set by `executor.devices`. Pure data:
the same placement drives `--dry-run`, the in-process
cluster and the Ray deployment. No torch, no ray here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor.transport.shaping import LinkShape
from placer import pdd
from placer.pdd import queue_chunk_tokens, queue_layout, set_queue_classes

if TYPE_CHECKING:
    from placer.plan import Plan, PoolOut
    from placer.specs import Scenario

DEFAULT_RTT_MS = 30.0
#: Most instances one deployment may start (checked before any instance is named).
MAX_INSTANCES = 100_000
#: Chunked-prefill size of an A instance whose plan names no chunk (prompt tokens per step;
#: SGLang's default on small GPUs, and the middle of the planner's AUTO_CHUNK_TOKENS).
DEFAULT_AGG_CHUNK_TOKENS = 2048


@dataclass(frozen=True)
class InstanceSpec:
    """One instance to start."""

    name: str
    role: str  # one of pdd.ROLES
    datacenter: str
    chip: str
    tp: int = 1
    device: str = "cpu"  # where its engine runs: "cpu" or "cuda" (`executor.devices.place_on_devices`)
    num_gpus: float = 0.0  # GPUs its actor claims from Ray (0 on the CPU)
    chunked_prefill_tokens: int | None = None  # A: prompt tokens per mixed step (None: the default)
    model: str | None = None  # a fleet plan's model this instance serves (None: a single-model plan)
    gpu_ids: tuple[int, ...] = ()  # a fleet on too few GPUs: the GPUs its model has to itself (`executor.devices`)

    def engine_config(self, base: Any) -> Any:
        """The engine settings this instance runs (`base`: the deployment's `EngineConfig`): an A
        instance prefills in chunks mixed into its decode steps — its spec's chunk, else one
        already set in `base`, else :data:`DEFAULT_AGG_CHUNK_TOKENS`; other roles run `base` as is."""
        if self.role != pdd.AGG:
            return base
        chunk = self.chunked_prefill_tokens or base.chunked_prefill_tokens or DEFAULT_AGG_CHUNK_TOKENS
        return dataclasses.replace(base, chunked_prefill_tokens=chunk)

    @property
    def resources(self) -> dict[str, float]:
        """Ray custom resources that pin it to its datacenter and chip (one unit per chip)."""
        return {dc_resource(self.datacenter): 1.0, chip_resource(self.chip): float(self.tp)}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)


def dc_resource(datacenter: str) -> str:
    return f"dc:{datacenter}"


def chip_resource(chip: str) -> str:
    return f"chip:{chip}"


def plan_models(plan: Plan) -> tuple[str, ...]:
    """The models a plan's rows name: the order of `plan.models`, then of first appearance; ()
    for a single-model plan."""
    named = [row.model for rows in (plan.pools, plan.routes, plan.assignments) for row in rows if row.model]
    if not named:
        return ()
    return tuple(dict.fromkeys([*(m for m in (plan.models or {}) if m in named), *named]))


def placement(plan: Plan, max_per_pool: int | None = None) -> list[InstanceSpec]:
    """Every pool's instances (at most `max_per_pool` of each, for a scaled-down emulation);
    ValueError when that is more than :data:`MAX_INSTANCES` in all, checked before any loop."""
    if max_per_pool is not None and max_per_pool < 1:
        raise ValueError(f"max_per_pool must be >= 1, got {max_per_pool}")
    total = sum(pool.count if max_per_pool is None else min(pool.count, max_per_pool) for pool in plan.pools)
    if total > MAX_INSTANCES:
        raise ValueError(f"pools: the plan asks for {total:,} instances, more than the {MAX_INSTANCES:,} a "
                         "deployment may start (use --max-per-pool for a scaled-down emulation)")
    out = []
    for pool in plan.pools:
        count = pool.count if max_per_pool is None else min(pool.count, max_per_pool)
        chunk = pool_chunk_tokens(plan, pool) if pool.role == pdd.AGG else None
        for k in range(count):
            out.append(InstanceSpec(instance_name(pool, k), pool.role, pool.datacenter, pool.chip, pool.tp,
                                    chunked_prefill_tokens=chunk, model=pool.model))
    return out


def instance_name(pool: PoolOut, k: int) -> str:
    """The name of a pool's `k`-th instance (0-based; in a fleet plan prefixed by its model)."""
    prefix = f"{_slug(pool.model)}." if pool.model else ""
    return f"{prefix}{pool.role.lower()}-{_slug(pool.datacenter)}-{_slug(pool.chip)}-tp{pool.tp}-{k}"


def p_instance_classes(plan: Plan) -> dict[str, frozenset[str]]:
    """Each P instance that may not take every class: the classes the plan routes to the queues laid on it.

    A pool's queues lie on its instances by `placer.pdd.queue_layout` (the planner's and the simulator's
    rule: in name order, a set's tiers together on whole instances, a "light" queue last); an instance
    admits the classes whose rows name a queue it carries, and a "set" queue's own classes
    (`assignments[].queue` 'set:<class>+…/u<tier>', `placer.pdd.set_queue_classes`) — the simulator sends
    each class's requests only to its queues' instances, so a long prompt never lands on a light
    queue's instance. Left out (they admit every class): instances that admit every class the plan
    prefills, and the instances of a pool whose rows name no queue."""
    rows: dict[tuple, list] = {}
    for a in plan.assignments:
        if a.role == pdd.P and a.queue is not None and a.queue_instances is not None:
            rows.setdefault((a.model, *a.key), []).append(a)
    known = {a.request_class for a in plan.assignments}
    prefilled = frozenset(a.request_class for a in plan.assignments if a.role == pdd.P)
    out: dict[str, frozenset[str]] = {}
    for pool in plan.pools:
        mine = rows.get((pool.model, pool.role, pool.datacenter, pool.chip, pool.tp), [])
        if not mine or pool.count < 1:
            continue
        queues = {a.queue: a.queue_instances for a in mine}
        routed: dict[str, set[str]] = {}
        for a in mine:
            routed.setdefault(a.queue, set()).add(a.request_class)
        admits: dict[int, set[str]] = {}
        for queue, parts in queue_layout(queues, pool.count).items():
            classes = set_queue_classes(queue, known) or frozenset()
            for i, _ in parts:
                admits.setdefault(i, set()).update(classes | routed[queue])
        out.update({instance_name(pool, i): frozenset(c) for i, c in admits.items() if not prefilled <= c})
    return out


def pool_chunk_tokens(plan: Plan, pool: PoolOut) -> int | None:
    """The chunk an A pool's queues (of its model, in a fleet) name in the plan (the largest when they
    differ), else None."""
    key = (pool.model, pool.role, pool.datacenter, pool.chip, pool.tp)
    named = [queue_chunk_tokens(a.queue) for a in plan.assignments
             if (a.model, a.role, a.datacenter, a.chip, a.tp) == key]
    return max((c for c in named if c), default=None)


def node_resources(specs: list[InstanceSpec]) -> dict[str, dict[str, float]]:
    """Per datacenter: the custom resources an emulated node needs to host its instances."""
    nodes: dict[str, dict[str, float]] = {}
    for s in specs:
        node = nodes.setdefault(s.datacenter, {})
        for key, value in s.resources.items():
            node[key] = node.get(key, 0.0) + value
    return nodes


def datacenters(plan: Plan) -> list[str]:
    """The plan's datacenters: its pools', then its links' ends, in order of first appearance."""
    seen: dict[str, None] = {}
    for p in plan.pools:
        seen.setdefault(p.datacenter, None)
    for link in plan.links:
        seen.setdefault(link.src, None)
        seen.setdefault(link.dst, None)
    return list(seen)


def front_datacenter(plan: Plan | list[InstanceSpec]) -> str:
    """Where the router (and the clients) sit: the datacenter of the first P pool, else of the first
    A pool (an aggregated plan); `plan` may also be a list of `InstanceSpec`s (a pool of one each)."""
    pools = plan if isinstance(plan, list) else plan.pools
    for role in pdd.PREFILL_ROLES:
        for p in pools:
            if p.role == role and getattr(p, "count", 1) > 0:
                return p.datacenter
    raise ValueError("pools: the plan has no P pool and no A pool: nothing can prefill")


def link_shapes(plan: Plan, scenario: Scenario | None = None, *, gbit_per_s: float | None = None,
                rtt_ms: float | None = None, jitter_ms: float | None = None,
                loss: float = 0.0) -> dict[frozenset[str], LinkShape]:
    """The WAN line of each datacenter pair: rate from the plan's link capacity (or the
    scenario's), RTT/jitter from the scenario (default 30 ms / 0); keyword overrides win."""
    scen = {}
    if scenario is not None:
        scen = {frozenset((lk.src, lk.dst)): lk for lk in scenario.links}
    pairs: dict[frozenset[str], float] = {}
    for lk in plan.links:
        pairs[frozenset((lk.src, lk.dst))] = lk.gbit_per_s_capacity
    for key, lk in scen.items():
        pairs.setdefault(key, lk.gbit_per_s)
    dcs = datacenters(plan)
    for i, a in enumerate(dcs):  # pairs the plan uses but lists no link for
        for b in dcs[i + 1:]:
            pairs.setdefault(frozenset((a, b)), 0.0)
    out = {}
    for key, rate in pairs.items():
        s = scen.get(key)
        rate = gbit_per_s if gbit_per_s is not None else (rate or (s.gbit_per_s if s else 10.0))
        rtt = rtt_ms if rtt_ms is not None else (s.rtt_ms if s else DEFAULT_RTT_MS)
        jit = jitter_ms if jitter_ms is not None else (s.jitter_ms if s else 0.0)
        out[key] = LinkShape(rate, rtt, jit, loss)
    return out
