"""Which pipeline a request takes, and how the router guesses prefix hits before prefill.

In: a request's input length, its estimated prefix-hit tokens on the chosen P and its
output budget; the plan (pipelines its routes use, its pools) and optionally the
scenario (request classes, filter thresholds). Out: a `Pipeline`.

Rules, in order (the pipeline names and the filter rule are PDD's, from
`placer.pdd`):
0. **aggregated** (pipeline A, role A: one instance prefills and decodes, nothing
   moves): a plan with A pools sends the share of requests its routes give A there —
   per request class when the scenario is known (the request's nearest class by
   input, output budget and predicted hit, like the simulator's classifier), else
   over the whole plan; each request draws a number in [0, 1) (`agg_draw`: a
   low-discrepancy sequence, so the realised share follows the plan's from the first
   requests on) and goes to A when it is below the share, or whenever the
   disaggregated side cannot serve it;
1. a baseline plan (pipeline P-D only) sends everything P → D;
2. **filtered** — long input, low hit, short output (all three: `pdd.FilterRule`) —
   finishes on RLD (P-RLD) and never crosses the WAN;
3. **high hit** (hit rate >= `direct_min_hit_rate`): the WAN transfer is small, go
   straight P → MD;
4. **low hit**: P → RLD → MD (RLD masks the transfer).
A pipeline the plan does not use is never chosen (e.g. no RLD pool → P-MD only).
Which P prefills it: where the plan has "set" P queues on whole instances, one that admits the
request's class (`executor.set_queues.SetQueues`, `RoutingPolicy.set_queues`; `executor.dispatch`).

`PrefixIndex` is the router's approximate copy of an instance's radix cache (a set
of chained block hashes, LRU-bounded), like cache-aware routers keep: it predicts
the hit before P is asked and picks the instance most likely to hold the prefix; it is
a `placer.prefix.PrefixCache` whose block keys are the blocks' token ids.
No torch here; imports only the placer base layer (`placer.pdd`).
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from executor.set_queues import SetQueues
from placer import pdd


class Pipeline(str, enum.Enum):
    """PDD's pipelines (`placer.pdd`) as an enum, for type safety in the router."""

    P_MD = pdd.P_MD
    P_RLD_MD = pdd.P_RLD_MD
    P_RLD = pdd.P_RLD  # filtered traffic only
    P_D = pdd.P_D  # PD baselines
    P_A = pdd.P_A  # aggregated: one A instance prefills and decodes

    @property
    def uses_relay(self) -> bool:
        return self.value in pdd.RELAY_PIPELINES

    @property
    def uses_main(self) -> bool:
        return self not in (Pipeline.P_RLD, Pipeline.P_A)


#: The Weyl sequence's step (the golden ratio's fraction): draws n·φ mod 1 fill [0, 1) evenly.
_GOLDEN_FRACTION = (math.sqrt(5) - 1) / 2


def agg_draw(n: int) -> float:
    """The `n`-th request's draw in [0, 1) for the aggregated split: fractions of n·φ, so any run
    of requests lands below a share s in about s of the cases (no randomness, no clustering)."""
    return (n * _GOLDEN_FRACTION) % 1.0


@dataclass(frozen=True)
class AggClass:
    """A request class and the share of its traffic the plan's routes send on pipeline A."""

    input_tokens: int
    output_tokens: int
    hit_rate: float
    share: float

    def distance(self, input_tokens: int, hit_rate: float, output_tokens: int) -> float:
        """How far a request is from this class: log-ratios of the lengths plus the hit gap."""
        return (abs(math.log(max(1, input_tokens) / max(1, self.input_tokens)))
                + abs(math.log(max(1, output_tokens) / max(1, self.output_tokens))) + abs(hit_rate - self.hit_rate))


class NoRouteError(RuntimeError):
    """No pipeline of the plan can serve this request (e.g. no decode pool registered)."""


@dataclass(frozen=True)
class RoutingPolicy:
    """The router's pipeline rules; thresholds from the plan's scenario when given."""

    allowed: frozenset[Pipeline] = frozenset({Pipeline.P_MD, Pipeline.P_RLD_MD, Pipeline.P_RLD})
    direct_min_hit_rate: float = 0.9
    filter_rule: pdd.FilterRule = pdd.DEFAULT_FILTER  # PDD's anomalous-traffic filter (rule 2)
    agg_share: float = 1.0  # share of requests on pipeline A when it is allowed (no per-class shares)
    agg_classes: tuple[AggClass, ...] = ()  # per class (from the scenario): its share on A
    #: the plan's "set" P queues on whole instances (`executor.set_queues`): None, every P takes anything
    set_queues: SetQueues | None = None

    def __post_init__(self) -> None:
        if not self.allowed:
            raise ValueError("allowed must name at least one pipeline")
        for name in ("direct_min_hit_rate", "agg_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0 <= self.filter_rule.max_hit_rate <= 1:
            raise ValueError(f"filter_rule.max_hit_rate must be in [0, 1], got {self.filter_rule.max_hit_rate}")

    def is_filtered(self, input_tokens: int, hit_tokens: int, max_output_tokens: int) -> bool:
        """PDD's filter rule on a request whose predicted prefix hit is `hit_tokens`."""
        return self.filter_rule.is_filtered(input_tokens, hit_tokens / max(1, input_tokens), max_output_tokens)

    def share_on_a(self, input_tokens: int, hit_tokens: int, max_output_tokens: int) -> float:
        """The share of requests like this one that the plan serves aggregated (0 without pipeline A)."""
        if Pipeline.P_A not in self.allowed:
            return 0.0
        if not self.agg_classes:
            return self.agg_share
        hit = hit_tokens / max(1, input_tokens)
        return min(self.agg_classes, key=lambda c: c.distance(input_tokens, hit, max_output_tokens)).share

    def wants_aggregated(self, input_tokens: int, hit_tokens: int, max_output_tokens: int, draw: float) -> bool:
        """Rule 0 (module doc): whether the request with this `agg_draw` goes to an A instance."""
        return draw < self.share_on_a(input_tokens, hit_tokens, max_output_tokens)

    def choose(self, input_tokens: int, hit_tokens: int, max_output_tokens: int,
               available: frozenset[Pipeline] | None = None) -> Pipeline:
        """The disaggregated pipeline for one request (`available`: what the registered instances can
        run now); pipeline A is decided before, by `wants_aggregated`."""
        ok = (self.allowed if available is None else self.allowed & available) - {Pipeline.P_A}
        if Pipeline.P_D in ok:
            return Pipeline.P_D
        hit = hit_tokens / max(1, input_tokens)
        if Pipeline.P_RLD in ok and self.is_filtered(input_tokens, hit_tokens, max_output_tokens):
            return Pipeline.P_RLD
        if Pipeline.P_MD in ok and (hit >= self.direct_min_hit_rate or Pipeline.P_RLD_MD not in ok):
            return Pipeline.P_MD
        if Pipeline.P_RLD_MD in ok:
            return Pipeline.P_RLD_MD
        raise NoRouteError(f"no pipeline for this request among {sorted(p.value for p in ok)}")

    @classmethod
    def from_plan(cls, plan: Any, scenario: Any = None, **overrides: Any) -> RoutingPolicy:
        """Rules consistent with a plan (`placer.plan.Plan`): its pipelines, its classes' hit rates."""
        allowed = {Pipeline(r.pipeline) for r in plan.routes if r.rps > 0}
        roles = {p.role for p in plan.pools if p.count > 0}
        if not allowed:
            if pdd.D in roles:
                allowed = {Pipeline.P_D}
            elif pdd.P in roles or pdd.AGG not in roles:
                allowed = {Pipeline.P_MD}
                if pdd.RLD in roles:
                    allowed |= {Pipeline.P_RLD_MD, Pipeline.P_RLD}
            if pdd.AGG in roles:
                allowed.add(Pipeline.P_A)
        kw: dict[str, Any] = {"allowed": frozenset(allowed), **_agg_shares(plan, scenario),
                              "set_queues": SetQueues.from_plan(plan, scenario)}
        if scenario is not None:
            o = scenario.options
            kw["filter_rule"] = pdd.FilterRule(o.filter_min_input_tokens, o.filter_max_hit_rate,
                                               o.filter_max_output_tokens)
            classes = {c.name: c for c in (scenario.workload.classes or [])}
            direct = [classes[r.request_class].hit_rate for r in plan.routes
                      if r.pipeline == pdd.P_MD and r.request_class in classes and r.rps > 0]
            relayed = [classes[r.request_class].hit_rate for r in plan.routes
                       if r.pipeline == pdd.P_RLD_MD and r.request_class in classes and r.rps > 0]
            if direct and relayed:
                kw["direct_min_hit_rate"] = (min(direct) + max(relayed)) / 2 if min(direct) > max(relayed) \
                    else min(direct)
            elif direct:
                kw["direct_min_hit_rate"] = 0.0
            elif relayed:
                kw["direct_min_hit_rate"] = 1.0
        return cls(**{**kw, **overrides})


def _agg_shares(plan: Any, scenario: Any) -> dict[str, Any]:
    """`agg_share` (the plan's rps on pipeline A over all its rps; without routes, A's instances over
    all prefilling instances) and, with a scenario, `agg_classes` (each routed class's share on A)."""
    rps: dict[str, list[float]] = {}  # class → [rps on A, rps in all]
    for r in plan.routes:
        if r.rps > 0:
            row = rps.setdefault(r.request_class, [0.0, 0.0])
            row[0] += r.rps if r.pipeline == pdd.P_A else 0.0
            row[1] += r.rps
    total = sum(row[1] for row in rps.values())
    if total > 0:
        share = sum(row[0] for row in rps.values()) / total
    else:
        count = {role: sum(p.count for p in plan.pools if p.role == role) for role in pdd.PREFILL_ROLES}
        share = count[pdd.AGG] / max(1, sum(count.values()))
    out: dict[str, Any] = {"agg_share": share}
    classes = {c.name: c for c in (getattr(getattr(scenario, "workload", None), "classes", None) or [])}
    if share > 0 and rps and set(rps) <= set(classes):
        out["agg_classes"] = tuple(AggClass(classes[n].input_tokens, classes[n].output_tokens, classes[n].hit_rate,
                                            row[0] / row[1]) for n, row in rps.items())
    return out


@dataclass
class PrefixIndex:
    """Approximate radix cache of one instance: chained hashes of whole blocks, LRU-bounded."""

    block_size: int
    capacity_blocks: int = 1 << 16
    _blocks: OrderedDict = field(default_factory=OrderedDict)

    @property
    def block_tokens(self) -> int:
        """Tokens per block (`block_size`)."""
        return self.block_size

    def block_keys(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        """The keys of `tokens`' whole blocks: each block's token ids (a partial last block has none)."""
        bs = self.block_size
        return [tuple(tokens[i * bs : (i + 1) * bs]) for i in range(len(tokens) // bs)]

    @staticmethod
    def _hashes(keys: Sequence[Hashable]) -> list[int]:
        """Chained hashes: each names its block and every block before it."""
        out, h = [], 0
        for key in keys:
            h = hash((h, key))
            out.append(h)
        return out

    def match(self, tokens: Sequence[int]) -> int:
        """Tokens of `tokens`' prefix this instance probably holds (whole blocks)."""
        return self.match_blocks(self.block_keys(tokens)) * self.block_size

    def match_blocks(self, keys: Sequence[Hashable]) -> int:
        """How many leading blocks of `keys` (`block_keys`) this instance probably holds; refreshes them."""
        n = 0
        for h in self._hashes(keys):
            if h not in self._blocks:
                break
            self._blocks.move_to_end(h)
            n += 1
        return n

    def insert(self, tokens: Sequence[int]) -> None:
        """Note that the instance now holds `tokens`' whole blocks."""
        self.insert_blocks(self.block_keys(tokens))

    def insert_blocks(self, keys: Sequence[Hashable], block_ids: Sequence[int] | None = None) -> None:
        """`insert` over block keys (`block_keys`); an index holds no KV, so `block_ids` are ignored."""
        for h in self._hashes(keys):
            self._blocks[h] = True
            self._blocks.move_to_end(h)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def __len__(self) -> int:
        return len(self._blocks)
