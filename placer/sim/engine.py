"""The discrete-event loop: requests through P, the network, RLD and MD, per the plan.

in:  a Problem, a Plan (pools, routes, assignments, handoff policy), a SimConfig
out: :class:`placer.sim.result.SimResult` (the Simulation JSON of docs/contracts.md)

One heap of ``(time, seq, handler, arg)`` events; arrivals are pulled lazily from the
workload so that only requests in flight exist. This module holds the state (pools,
lines, router, counters), the loop and :func:`simulate`; the handlers are the stages of a
request's life, one mixin each in :mod:`placer.sim.events`:

1. **arrive** (:mod:`~placer.sim.events.arrival`) — hits, class, path from the plan
   (:mod:`placer.sim.router`), instances picked in each pool.
2. **prefill** at its P instance (:mod:`placer.sim.prefill`); when it ends, what leaves P
   (:mod:`~placer.sim.events.prefill`).
3. **move** (:mod:`~placer.sim.events.kv`): KV over RDMA or the WAN line (:mod:`placer.sim.links`);
   on the executor's runtime the orders, pulls, exports and imports (:mod:`placer.sim.runtime`).
   P-RLD-MD (:mod:`~placer.sim.events.relay`): RLD decodes eagerly, then the token-ID handoff
   (:mod:`placer.sim.handoff`) moves the request to MD. The first decoder streams t0 — sampled by P,
   carried with the KV — when it admits the request (:func:`placer.flows.ttft_det_s`).
4. **decode and finish** (:mod:`~placer.sim.events.decode`) — TTFT, TPOT, SLA, per-route figures go
   into streamed sketches; the request object is dropped.
"""

from __future__ import annotations

import itertools
import random
import time
from heapq import heappop, heappush

from placer.errors import InputError
from placer.aggregated import plan_designs, sim_model
from placer.flows import decode_design, decode_design_for, instance
from placer.pdd import AGG, CATCH_UP, D, MD, ONE_SHOT, P
from placer.sim.config import SimConfig
from placer.sim.decode import DecodeInstance
from placer.sim.drc import BlockCache
from placer.sim.events.arrival import ArrivalEvents
from placer.sim.events.decode import DecodeEvents
from placer.sim.events.kv import KvEvents
from placer.sim.events.prefill import PrefillEvents
from placer.sim.events.relay import RelayEvents
from placer.sim.events.request import Req
from placer.sim.links import WanLink
from placer.sim.metrics import QuantileSketch, TimeSeries
from placer.sim.prefill import PrefillInstance
from placer.sim.router import Router
from placer.sim.runtime import Host
from placer.sim.sources import count_lines, sub_seed, work_items
from placer.workload.trace import BLOCK_TOKENS

__all__ = ["Pool", "Req", "Simulation", "simulate"]


class Pool:
    __slots__ = ("key", "role", "dc", "chip", "tp", "count", "im", "instances", "series", "design_batch", "prefill")

    def __init__(self, key, count, im, series):
        self.key = key
        self.role, self.dc, self.chip, self.tp = key
        self.count = count
        self.im = im
        self.instances: list = []
        self.series = series
        self.design_batch = 0
        self.prefill = None  # A pools: the Pool of their prefill halves (placer.aggregated.AggInstanceModel)

    @property
    def label(self) -> str:
        return f"{self.role} {self.dc} {self.chip} tp{self.tp}"


class Simulation(ArrivalEvents, PrefillEvents, KvEvents, RelayEvents, DecodeEvents):
    """One replay of ``plan`` under ``config``; call :meth:`run` once."""

    def __init__(self, problem, plan, config: SimConfig | None = None, progress=None):
        self.problem = problem
        self.plan = plan
        self.config = cfg = config or SimConfig()
        self.progress = progress
        self.heap: list = []
        self.seq = itertools.count()
        self.kv = problem.kv_bytes_per_token
        self.sla_ttft = problem.ttft_p90_s
        self.sla_tpot = problem.tpot_s * (1 + 1e-6)
        handoff = plan.handoff
        self.handoff_policy = cfg.handoff_mode or handoff.mode
        self.handoff_threshold = (cfg.catch_up_threshold_tokens if cfg.catch_up_threshold_tokens is not None
                                  else handoff.catch_up_threshold_tokens)
        self.rng_route = random.Random(sub_seed(cfg.seed, 1))
        self.drc_lag = cfg.drc_lag
        self.route_by_drc = cfg.route_by == "drc-hit"
        self.rng_net = random.Random(sub_seed(cfg.seed, 2))
        self._build()

    # ---- construction --------------------------------------------------------
    def _pool_counts(self) -> dict:
        """(role, dc, chip, tp) → instances, over the plan's pools with any; InputError for none, or for a
        datacenter or chip the scenario lacks."""
        problem = self.problem
        counts = {}
        for p in self.plan.pools:
            if p.count > 0:
                key = p.key
                counts[key] = counts.get(key, 0) + p.count
        if not counts:
            raise InputError("plan has no pools with instances to simulate")
        for role, dc, chip, _ in counts:
            if dc not in problem.dc_names:
                raise InputError(f"plan pool in unknown datacenter {dc!r}; scenario has {', '.join(problem.dc_names)}")
            if chip not in problem.chips:
                raise InputError(f"plan pool uses unknown chip {chip!r}")
        return counts

    def _build(self) -> None:
        """The plan's instances in their pools, the WAN lines, the router."""
        problem, plan, cfg = self.problem, self.plan, self.config
        counts = self._pool_counts()
        self.router_rps_hint = sum(r.rps for r in plan.routes)
        horizon = self._horizon_guess()
        self.horizon = horizon
        bins = cfg.series_bins
        self.runtime = rt = cfg.runtime
        self.host = Host(rt) if rt is not None else None  # LocalCluster: one process, one host
        self.pools: dict = {}
        self.agg_pair: dict = {}  # A: prefill half -> decode half of the same instance
        designs = plan_designs(problem, plan, {k: instance(problem, k[2], k[3]) for k in counts if k[0] == AGG})
        for key, count in counts.items():
            if key[0] == AGG:
                self.pools[key] = self._agg_pool(key, count, sim_model(designs[key]), horizon, bins)
                self.pools[key].design_batch = designs[key].batch  # A: the plan's design (mean KV, preempts)
                continue
            im = instance(problem, key[2], key[3])
            pool = Pool(key, count, im, TimeSeries(horizon, bins, "max"))
            if key[0] == P:
                pool.instances = [PrefillInstance(self, im, pool, pool.series, cfg.batch_tail_chunks, rt, self.host)
                                  for _ in range(count)]
            else:
                pool.instances = [DecodeInstance(self, im, key[0], pool, pool.series, rt, self.host)
                                  for _ in range(count)]
                pool.design_batch = served_design_batch(problem, plan, key, im)
            self.pools[key] = pool
        self.links: dict = {}
        for (s, d), link in sorted(problem.links.items()):
            self.links[(s, d)] = WanLink(self, s, d, link.bytes_per_s, link.rtt_s, link.jitter_ms / 1000,
                                         TimeSeries(horizon, bins, "sum"), self.rng_net)
        self.router = Router(problem, plan, self.pools, self.links, problem.options.drc)
        if self.router.total_rps <= 0:
            raise InputError("plan has no routes carrying traffic: nothing to simulate "
                             "(run `placer evaluate` to route a plan given as pools only)")
        for (s, d), wl in self.links.items():
            if wl.rate <= 0 and any(p.link is wl for ps in self.router.paths for p in ps):
                raise InputError(f"plan routes traffic over line {s}->{d}, which has 0 Gbit/s")

    def _agg_pool(self, key, count, im, horizon: float, bins: int) -> Pool:
        """An A pool: each instance a decode half (mixed steps) and a prefill half (one design
        step per chunk), paired so that a request decodes where it was prefilled."""
        pool = Pool(key, count, im, TimeSeries(horizon, bins, "max"))
        pool.instances = [DecodeInstance(self, im, AGG, pool, pool.series) for _ in range(count)]
        half = Pool(key, count, im, TimeSeries(horizon, bins, "max"))
        half.instances = [PrefillInstance(self, im, half, half.series, self.config.batch_tail_chunks)
                          for _ in range(count)]
        pool.prefill = half
        self.agg_pair.update(zip(half.instances, pool.instances))
        return pool

    def _horizon_guess(self) -> float:
        cfg = self.config
        rate = cfg.load_rps or self.router_rps_hint or self.problem.arrival_rps
        if cfg.workload == "trace":
            return max(1.0, cfg.requests / max(rate, 1e-9))
        return max(1.0, cfg.requests / rate)

    # ---- the loop ------------------------------------------------------------
    def run(self):
        """Replay the workload to its last event; the Simulation JSON of the run."""
        from placer.sim.result import collect

        cfg = self.config
        n_total = cfg.requests
        if cfg.workload == "trace":
            n_total = min(n_total, count_lines(cfg.trace, n_total))
        self.warm_n = int(n_total * cfg.warmup_fraction)
        self._init_stats()
        items, self.offered_rps, warm = work_items(self.problem, self.router, cfg)
        if cfg.workload == "agentic" or cfg.workload == "trace":
            self._fill_caches(warm)
        self._pace_ev = pace = self._ev_host_pace  # one bound method, so the loop below tells it by identity
        self._start_host_pace()
        start = time.perf_counter()
        heap = self.heap
        pop = heappop
        arrive = self.arrive
        step = max(1, n_total // 200)
        progress = self.progress
        count = 0
        nxt = next(items, None)
        t = t_work = 0.0
        while True:
            if heap and (nxt is None or heap[0][0] <= nxt[0]):
                t, _, fn, arg = pop(heap)
                fn(t, arg)
                if fn is not pace:  # the host's speed moving is no work: it does not set the run's end
                    t_work = t
            elif nxt is not None:
                t = t_work = nxt[0]
                arrive(nxt, count)
                count += 1
                if count >= n_total:
                    nxt = None
                else:
                    nxt = next(items, None)
                if progress is not None and count % step == 0:
                    progress(count, n_total)
            else:
                break
        self.arrived = count
        self.t_end = t_work
        wall = time.perf_counter() - start
        if progress is not None:
            progress(count, n_total)
        if count == 0:
            raise InputError("the workload produced no requests")
        return collect(self, wall)

    def _fill_caches(self, warm) -> None:
        """hash_ids workloads: P's prefix store and each MD/D's radix cache, warmed with ``warm``'s prefixes."""
        cfg = self.config
        self.store = BlockCache(cfg.prefix_cache_blocks)
        caches = [self.store]
        for pool in self.pools.values():
            if pool.role in (MD, D):
                cap = int(pool.im.kv_capacity_tokens * cfg.drc_capacity_fraction / BLOCK_TOKENS)
                for inst in pool.instances:
                    inst.cache = BlockCache(max(1, cap))
                    caches.append(inst.cache)
        for prefix in warm:
            for cache in caches:
                cache.insert(prefix)

    def _start_host_pace(self) -> None:
        """The first move of each host-speed timeline (``ExecutorRuntime.host_pace``), where given."""
        timelines = ((False, self.runtime.host_pace), (True, self.runtime.host_pace_prefill)) if self.host else ()
        for prefill, points in timelines:
            if points:
                at = points[0][0]
                heappush(self.heap, (at if at > 0.0 else 0.0, next(self.seq), self._pace_ev, (prefill, 0)))

    def _ev_host_pace(self, t: float, arg: tuple[bool, int]) -> None:
        """The host's speed moves (``ExecutorRuntime.host_pace``, or with ``prefill`` the prefills' own,
        ``host_pace_prefill``), then the next move is scheduled. A move is no work: :meth:`run` does not end the
        run at one, so a timeline longer than the run does not stretch it."""
        prefill, i = arg
        points = self.runtime.host_pace_prefill if prefill else self.runtime.host_pace
        self.host.set_drift(t, points[i][1], prefill)
        if i + 1 < len(points):
            heappush(self.heap, (points[i + 1][0], next(self.seq), self._pace_ev, (prefill, i + 1)))

    def _init_stats(self) -> None:
        self.ttft = QuantileSketch()
        self.tpot = QuantileSketch()
        n_routes = len(self.router.routes)
        self.route_ttft = [QuantileSketch() for _ in range(n_routes)]
        self.route_good = [0] * n_routes
        self.measured = 0
        self.good = 0
        self.rejected = 0
        self.rejected_measured = 0  # of them, past the warm-up (counted in ``measured``, never served)
        self.tokens_total = 0
        self.tokens_rld = 0
        self.handoffs = {ONE_SHOT: 0, CATCH_UP: 0, "none": 0}
        self.first_measured_t = None
        self.last_arrival_t = 0.0
        self.hit_tokens_p = 0.0
        self.hit_tokens_drc = 0.0
        self.input_tokens = 0.0
        self.arrived = 0


def served_design_batch(problem, plan, key, im) -> int:
    """The design batch a decode pool ``key`` reports: :func:`placer.flows.decode_design_for` (TPOT at
    the served context, the reserved KV at the occupancy quantile, :mod:`placer.kv_admission`) over
    the classes the plan's assignments send it, each weighted by req/s × output tokens (its
    requests held at once); the scenario's mix where the plan names none (pools only)."""
    classes = {c.name: c for c in problem.classes}
    held: dict[str, float] = {}
    for a in plan.assignments:
        if a.key == key and a.rps > 0 and a.request_class in classes:
            held[a.request_class] = held.get(a.request_class, 0.0) + a.rps * classes[a.request_class].output_tokens
    if not held:
        return decode_design(problem, im)[0]
    return decode_design_for(problem, im, [(classes[name], w) for name, w in held.items()])[0]


def simulate(scenario, plan, config: SimConfig | None = None, progress=None, simulation_class=None):
    """Replay ``plan`` for ``scenario`` (a Scenario or a resolved Problem) in the simulator.

    Plans without per-pool ``assignments`` are first routed by
    :func:`placer.optimize.evaluate_plan` (pools fixed). A plan whose pools cannot carry
    its load (evaluate finds no routing) is replayed anyway, its routes split over its
    pools by :func:`placer.sim.assign.replayable`: the result's ``warnings`` say so and
    what the run measured going wrong (:func:`placer.sim.assign.overload_signs`). A plan
    naming a chip, datacenter or class the scenario lacks is an InputError.
    ``simulation_class``: what builds the run from (problem, plan, config, progress) —
    :class:`Simulation` or a subclass (:class:`placer.sim.records.RecordingSimulation`) — ``None`` the
    plain one.
    """
    from placer.errors import InfeasiblePlanError
    from placer.optimize import as_problem, evaluate_plan
    from placer.sim.assign import check_names, overload_signs, replayable

    problem = as_problem(scenario)
    check_names(problem, plan)
    warnings = []
    if not plan.assignments:
        try:
            plan = evaluate_plan(problem, plan)
        except InfeasiblePlanError as err:
            warnings.append(f"the plan cannot carry its load ({err.reason}); replaying it as given")
            plan = replayable(problem, plan)
    result = (simulation_class or Simulation)(problem, plan, config, progress).run()
    result.data["warnings"] = [*warnings, *overload_signs(result, problem.ttft_p90_s)]
    return result
