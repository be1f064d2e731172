"""A fleet over the day: which pools serve, which start, which drain, and what that costs.

in:  plans applied at instants (:meth:`FleetState.apply`), the :class:`Startup` costs, a window
out: per window the segments to simulate (the pools up, for how long) and the USD charged

The four fleets of ``placer simulate --replan-every`` are each one :class:`FleetState`: *static*
(the plan for the day's mean workload, applied once before the day), *peak* (the plan for the
busiest window), *replanned* (the plans the adoption rule lets through, applied with start-up and
drain) and *oracle* (each window's own optimum, applied instantly: no start-up, no drain).

A change from the serving pools S to a plan T (counts per pool key):

* the instances T adds start: each takes ``weight bytes / (its chips × load rate) + warm-up``
  (:meth:`Startup.instance_s`); the change is ready when the slowest has started;
* **auto** (the default: the executor's rule, ``executor.elastic.choose_strategy``): make-before-break
  when the datacenters' free chips (inventory less the serving pools') hold the added instances,
  else break-before-make;
* **make-before-break**: until ready S keeps serving and S ∪ T (the larger
  count per pool) is charged; then T serves and the instances S loses drain for ``drain_s``, charged,
  taking no new requests;
* **break-before-make**: the instances S loses stop taking requests at once (drain charged), S ∩ T
  (the smaller count per pool) serves until ready — a capacity dip, counted in ``dip_s`` — and T is
  charged from the start.

A change adopted while another is still starting abandons the one starting (what it cost stays).

An inventory change that leaves a datacenter fewer chips than a fleet's pools use there takes the
instances away at once (:meth:`FleetState.fit_inventory`, :func:`within_inventory`): one at a time
from the pool with the most chips in that place, until the rest fit; no drain (the chips are gone),
counted in ``chips_lost``. Every fleet: the static and peak plans serve on with what is left, the
replanned fleet's current plan is cut the same way until its job re-solves, a change under way is
cut too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from placer.change_strategy import BREAK_BEFORE_MAKE, MAKE_BEFORE_BREAK, choose_strategy
from placer.errors import InputError
from placer.plan import Plan, PoolOut
from placer.problem import Problem
from placer.readers import load_mapping

AUTO = "auto"
STRATEGIES = (AUTO, MAKE_BEFORE_BREAK, BREAK_BEFORE_MAKE)

#: Published cold starts these defaults follow (docs in placer/replan/README.md): vLLM on one node,
#: a 35B NVFP4 checkpoint (20+ GB) from local NVMe: weights ~142 s, torch.compile ~39 s, five minutes
#: or more to ready (route179.dev, 2026-06-30); Qwen3-235B-A22B on vLLM: "close to ten minutes" cold
#: (Baidu AI Cloud's cold-start article). 0.25 GB/s per chip × 16 chips loads DeepSeek-V3.2's 671 GB
#: of fp8 weights in ~168 s; with 120 s of compile, graph capture and profiling, ~4.8 min to ready.
DEFAULT_LOAD_GBYTE_PER_S_PER_CHIP = 0.25
DEFAULT_WARMUP_S = 120.0
#: A draining instance finishes what it holds: ~1K output tokens at the 50 ms TPOT of the flagship's SLA.
DEFAULT_DRAIN_S = 60.0

Pools = dict[tuple, PoolOut]  # pool key → row (its count the instances)


@dataclass(frozen=True)
class Startup:
    """What a plan change costs: instance start-up (weights load + warm-up), drain, the strategy."""

    load_gbyte_per_s_per_chip: float = DEFAULT_LOAD_GBYTE_PER_S_PER_CHIP
    warmup_s: float = DEFAULT_WARMUP_S
    drain_s: float = DEFAULT_DRAIN_S
    strategy: str = AUTO
    startup_s: float | None = None  # given: every instance takes this long, whatever its weights
    #: where the figures come from when measured (``bench/bench_startup.py``'s JSON, :meth:`measured`)
    measured_from: dict | None = field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name in ("load_gbyte_per_s_per_chip",):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"{name.replace('_', '-')}: a finite number > 0, got {v!r}")
        for name in ("warmup_s", "drain_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"{name.replace('_', '-')}: a finite number >= 0, got {v!r}")
        if self.startup_s is not None and not (math.isfinite(self.startup_s) and self.startup_s >= 0):
            raise InputError(f"startup: a duration >= 0, got {self.startup_s!r}")
        if self.strategy not in STRATEGIES:
            raise InputError(f"strategy: one of {', '.join(STRATEGIES)}, got {self.strategy!r}")

    @classmethod
    def measured(cls, path: str | Path, strategy: str = AUTO) -> Startup:
        """The executor's own figures on this machine (``bench/bench_startup.py --write PATH``): its load
        rate, warm-up and drain, the same terms as the published defaults; the file kept as provenance."""
        raw = load_mapping(path, "--startup-measured file", kind="json")
        got = {}
        for name in ("load_gbyte_per_s_per_chip", "warmup_s", "drain_s"):
            v = raw.get(name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(f"--startup-measured: {str(path)!r} field {name}: a number, got {v!r}")
            got[name] = float(v)
        return cls(**got, strategy=strategy, measured_from={"file": str(path), **raw})

    def instance_s(self, problem: Problem, row: PoolOut) -> float:
        """Seconds from launch to ready of one instance of ``row``."""
        if self.startup_s is not None:
            return self.startup_s
        chips = max(1, int(row.tp))
        weights = problem.model.weight_bytes(problem.weight_dtype)
        return weights / (chips * self.load_gbyte_per_s_per_chip * 1e9) + self.warmup_s


def pools_of(plan: Plan) -> Pools:
    out: Pools = {}
    for row in plan.pools:
        if row.count <= 0:
            continue
        prev = out.get(row.key)
        out[row.key] = row if prev is None else prev.model_copy(update={"count": prev.count + row.count})
    return out


def _combine(a: Pools, b: Pools, pick) -> Pools:
    out: Pools = {}
    for key in set(a) | set(b):
        n = pick(a[key].count if key in a else 0, b[key].count if key in b else 0)
        if n > 0:
            out[key] = (b.get(key) or a[key]).model_copy(update={"count": n})
    return out


def union(a: Pools, b: Pools) -> Pools:
    return _combine(a, b, max)


def intersection(a: Pools, b: Pools) -> Pools:
    return _combine(a, b, min)


def minus(a: Pools, b: Pools) -> Pools:
    """The instances of ``a`` that ``b`` does not keep."""
    return _combine(a, b, lambda x, y: max(0, x - y))


def chips(pools: Pools) -> int:
    return sum(r.count * int(r.tp) for r in pools.values())


def cost_usd_per_h(problem: Problem, pools: Pools) -> float:
    return sum(r.count * int(r.tp) * problem.chips[r.chip].price_usd_per_h for r in pools.values())


def changed_pools(a: Pools, b: Pools) -> int:
    """Pools added, removed or resized from ``a`` to ``b`` (the jobs' diff counts the same)."""
    return sum(1 for k in set(a) | set(b) if (a[k].count if k in a else 0) != (b[k].count if k in b else 0))


def chips_by_place(pools: Pools) -> dict[tuple[str, str], int]:
    """Chips per (datacenter, chip) the pools hold: the simulator's data adapter of the apply rule."""
    out: dict[tuple[str, str], int] = {}
    for r in pools.values():
        out[(r.datacenter, r.chip)] = out.get((r.datacenter, r.chip), 0) + r.count * int(r.tp)
    return out


def free_chips(problem: Problem, serving: Pools) -> dict[tuple[str, str], int]:
    """Each datacenter's inventory less the serving pools' chips."""
    used = chips_by_place(serving)
    have = {(dc.name, chip): n for dc in problem.datacenters for chip, n in dc.inventory.items()}
    return {key: have.get(key, 0) - used.get(key, 0) for key in set(have) | set(used)}


def fits_beside(problem: Problem, serving: Pools, added: Pools) -> bool:
    """The executor's rule (:func:`placer.change_strategy.choose_strategy`, the function
    ``executor.elastic.choose_strategy`` applies): make-before-break when the free chips of each
    datacenter (inventory less the serving pools') hold the added instances."""
    leaving: dict = {}  # the leaving instances' chips do not decide between the two strategies
    return choose_strategy(chips_by_place(added), free_chips(problem, serving), leaving).strategy == MAKE_BEFORE_BREAK


def within_inventory(problem: Problem, pools: Pools) -> Pools:
    """``pools`` cut to each datacenter's inventory (see the module docstring); unchanged where they fit."""
    have = {(dc.name, chip): n for dc in problem.datacenters for chip, n in dc.inventory.items()}
    out = dict(pools)
    for place, used in sorted(chips_by_place(pools).items()):
        over = used - have.get(place, 0)
        while over > 0:
            here = [k for k, r in out.items() if (r.datacenter, r.chip) == place]
            key = max(here, key=lambda k: (out[k].count * int(out[k].tp), repr(k)))
            row = out[key]
            if row.count <= 1:
                del out[key]
            else:
                out[key] = row.model_copy(update={"count": row.count - 1})
            over -= int(row.tp)
    return out


@dataclass
class Segment:
    """A stretch of a window with one set of pools up."""

    length_s: float
    serving: Pools


@dataclass
class FleetState:
    name: str
    startup: Startup
    serving: Pools = field(default_factory=dict)
    target: Pools | None = None
    ready_at_s: float = 0.0
    draining: list[tuple[Pools, float]] = field(default_factory=list)  # (instances, drained at)
    changes: int = 0
    chips_moved: int = 0
    dip_s: float = 0.0
    breaks: int = 0  # changes applied break-before-make
    chips_lost: int = 0  # taken away by inventory changes
    backlog: float = 0.0  # requests queued at the end of the last window (placer.replan.backlog)
    #: window index → (requests offered, the simulated run's finished requests) per stretch: the served log
    served_log: dict = field(default_factory=dict)
    strategy: str = MAKE_BEFORE_BREAK  # the strategy of the change under way

    def apply(self, plan: Plan | Pools, now_s: float, problem: Problem, instant: bool = False) -> None:
        """Start changing to ``plan`` at ``now_s`` (``instant``: no start-up, no drain — the oracle)."""
        new = plan if isinstance(plan, dict) else pools_of(plan)
        if changed_pools(self.serving, new) == 0 and self.target is None:
            return
        self.target = None
        had = bool(self.serving)
        self.changes += 1 if had else 0
        self.chips_moved += chips(minus(new, self.serving)) + chips(minus(self.serving, new)) if had else 0
        if instant or not had:
            self.serving, self.ready_at_s = new, now_s
            return
        added = minus(new, self.serving)
        ready = now_s + max((self.startup.instance_s(problem, r) for r in added.values()), default=0.0)
        gone = minus(self.serving, new)
        self.strategy = self.startup.strategy
        if self.strategy == AUTO:
            self.strategy = MAKE_BEFORE_BREAK if fits_beside(problem, self.serving, added) else BREAK_BEFORE_MAKE
        self.breaks += self.strategy == BREAK_BEFORE_MAKE
        if self.strategy == BREAK_BEFORE_MAKE and gone:
            self.draining.append((gone, now_s + self.startup.drain_s))
        if ready <= now_s:
            self._ready(new, now_s)
        else:
            self.target, self.ready_at_s = new, ready

    def fit_inventory(self, problem: Problem) -> int:
        """Cut the serving pools (and a change under way) to ``problem``'s inventory; the chips lost."""
        cut = within_inventory(problem, self.serving)
        lost = chips(minus(self.serving, cut))
        self.serving, self.chips_lost = cut, self.chips_lost + lost
        if self.target is not None:
            self.target = within_inventory(problem, self.target)
            if changed_pools(self.serving, self.target) == 0:
                self.target = None
        return lost

    def _ready(self, new: Pools, at_s: float) -> None:
        gone = minus(self.serving, new)
        if self.strategy == MAKE_BEFORE_BREAK and gone:
            self.draining.append((gone, at_s + self.startup.drain_s))
        self.serving, self.target = new, None

    def window(self, start_s: float, length_s: float, problem: Problem) -> tuple[list[Segment], float]:
        """The window's segments (pools up) and the USD charged over it; advances the state to its end."""
        end = start_s + length_s
        segments: list[Segment] = []
        usd = 0.0
        t = start_s
        if self.target is not None and self.ready_at_s < end:
            cut = max(t, self.ready_at_s)
            if cut > t:
                segments.append(Segment(cut - t, self._up()))
                usd += cost_usd_per_h(problem, self._charged()) * (cut - t) / 3600
                self._dip(cut - t)
            self._ready(self.target, cut)
            t = cut
        if t < end:
            segments.append(Segment(end - t, self._up()))
            usd += cost_usd_per_h(problem, self._charged()) * (end - t) / 3600
            if self.target is not None:
                self._dip(end - t)
        for pools, until in self.draining:
            overlap = min(end, until) - max(start_s, until - self.startup.drain_s)
            if overlap > 0:
                usd += cost_usd_per_h(problem, pools) * overlap / 3600
        self.draining = [(p, u) for p, u in self.draining if u > end]
        return segments, usd

    def _up(self) -> Pools:
        if self.target is not None and self.strategy == BREAK_BEFORE_MAKE:
            return intersection(self.serving, self.target)
        return self.serving

    def _charged(self) -> Pools:
        if self.target is None:
            return self.serving
        if self.strategy == BREAK_BEFORE_MAKE:
            return self.target
        return union(self.serving, self.target)

    def _dip(self, length_s: float) -> None:
        if self.strategy == BREAK_BEFORE_MAKE and self.target is not None:
            if changed_pools(self._up(), self.serving):
                self.dip_s += length_s


def pools_plan(template: Plan, pools: Mapping[tuple, PoolOut]) -> Plan:
    """A replayable plan of just these pools (routes and assignments left to the simulator's assigner)."""
    return template.model_copy(update={"pools": list(pools.values()), "routes": [], "assignments": []})
