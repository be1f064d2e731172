"""The discrete-event loop: requests through P, the network, RLD and MD, per the plan.

in:  a Problem, a Plan (pools, routes, assignments, handoff policy), a SimConfig
out: :class:`placer.sim.result.SimResult` (the Simulation JSON of docs/contracts.md)

One heap of ``(time, seq, handler, arg)`` events; arrivals are pulled lazily from the
workload so that only requests in flight exist. A request's life:

1. **arrive** — P-side hit (the class's, or the prefix store's for hash_ids), decode-side
   hit (the same less ``drc_lag``, or the MD radix cache's), class by that hit, path
   drawn from the plan (:mod:`placer.sim.router`), instances picked in each pool.
2. **prefill** at its P instance (:mod:`placer.sim.prefill`).
3. **move**: P-MD / P-D — KV over RDMA or the WAN line (:mod:`placer.sim.links`), then
   decode on MD/D. P-RLD-MD — full KV to RLD over RDMA and, at once, the uncached KV
   over the line to MD; RLD decodes eagerly; when the KV lands on MD the token-ID
   handoff (:mod:`placer.sim.handoff`) moves the request to MD (unless RLD finished
   it first; the KV still lands, so MD's radix cache holds it for the session's next
   turn). P-RLD — the filter: all on RLD, nothing crosses. On the executor's runtime each
   decoder pulls its KV when it handles its order, between two of its steps, and P sends
   the KV when both its prefill and that pull are done (:mod:`placer.sim.runtime`).
   The first decoder (RLD on the relay pipelines, else MD/D) streams t0 — sampled by P,
   carried with the KV — when it admits the request, and decodes the other n_out − 1
   tokens (:func:`placer.flows.ttft_det_s`); ``rld_tokens`` counts what RLD streamed, t0 included.
4. **finish** — TTFT, TPOT, SLA, per-route figures go into streamed sketches; the
   request object is dropped.
"""

from __future__ import annotations

import itertools
import random
import time
from bisect import bisect_right
from heapq import heappop, heappush

from placer.errors import InputError
from placer.aggregated import plan_designs, sim_model
from placer.flows import decode_context_tokens, instance
from placer.pdd import AGG, CATCH_UP, D, MD, ONE_SHOT, P, RLD, handoff_mode
from placer.perfmodel import RDMA_LATENCY_S
from placer.sim.config import SimConfig
from placer.sim.decode import DecodeInstance
from placer.sim.drc import BlockCache
from placer.sim.handoff import plan_handoff
from placer.sim.links import WanLink
from placer.sim.metrics import QuantileSketch, TimeSeries
from placer.sim.prefill import PrefillInstance
from placer.sim.router import Router
from placer.sim.runtime import Host
from placer.sim.sources import count_lines, sub_seed, work_items
from placer.workload.trace import BLOCK_TOKENS

# request stages
PREFILL, ON_RLD, HANDOFF, ON_MD, DONE = range(5)
# pipeline codes (router.PIPE_CODE)
PMD, PRLDMD, PRLD, PD, PA = 0, 1, 2, 3, 4
# runtime: which consumers' pulls have reached P (Req.pulls)
_PULL_MD, _PULL_RLD = 1, 2


class Req:
    __slots__ = ("rid", "t_arr", "n_in", "n_out", "hit", "new", "left", "pos", "path", "p", "rld", "md",
                 "xfer", "t_first", "stage", "rld_tokens", "dec", "vjoin", "dec_tokens", "dec_pause", "ctx",
                 "flow", "kv_md", "ids", "md_pause", "drc_hit", "pulls", "staged", "exported")


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


class Simulation:
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
    def _build(self) -> None:
        problem, plan, cfg = self.problem, self.plan, self.config
        counts = {}
        for p in plan.pools:
            if p.count > 0:
                key = (p.role, p.datacenter, p.chip, p.tp)
                counts[key] = counts.get(key, 0) + p.count
        if not counts:
            raise InputError("plan has no pools with instances to simulate")
        for role, dc, chip, _ in counts:
            if dc not in problem.dc_names:
                raise InputError(f"plan pool in unknown datacenter {dc!r}; scenario has {', '.join(problem.dc_names)}")
            if chip not in problem.chips:
                raise InputError(f"plan pool uses unknown chip {chip!r}")
        self.router_rps_hint = sum(r.rps for r in plan.routes)
        horizon = self._horizon_guess()
        self.horizon = horizon
        bins = cfg.series_bins
        ctx = decode_context_tokens(problem.classes)
        self.runtime = rt = cfg.runtime
        self.host = Host(rt) if rt is not None else None  # LocalCluster: one process, one host
        self.pools: dict = {}
        self.agg_pair: dict = {}  # A: prefill half -> decode half of the same instance
        designs = plan_designs(problem, plan, {k: instance(problem, k[2], k[3]) for k in counts if k[0] == AGG})
        for key, count in counts.items():
            if key[0] == AGG:
                self.pools[key] = self._agg_pool(key, count, sim_model(designs[key]), horizon, bins)
                continue
            im = instance(problem, key[2], key[3])
            pool = Pool(key, count, im, TimeSeries(horizon, bins, "max"))
            if key[0] == P:
                pool.instances = [PrefillInstance(self, im, pool, pool.series, cfg.batch_tail_chunks, rt, self.host)
                                  for _ in range(count)]
            else:
                pool.instances = [DecodeInstance(self, im, key[0], pool, pool.series, rt, self.host)
                                  for _ in range(count)]
                pool.design_batch = im.max_batch(ctx, problem.tpot_s)
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
        pool.design_batch = im.max_batch(decode_context_tokens(self.problem.classes), self.problem.tpot_s)
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
        from placer.sim.result import collect

        cfg = self.config
        n_total = cfg.requests
        if cfg.workload == "trace":
            n_total = min(n_total, count_lines(cfg.trace, n_total))
        self.warm_n = int(n_total * cfg.warmup_fraction)
        self._init_stats()
        items, self.offered_rps, warm = work_items(self.problem, self.router, cfg)
        hash_mode = cfg.workload == "agentic" or cfg.workload == "trace"
        if hash_mode:
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
        self._pace_ev = pace = self._ev_host_pace  # one bound method, so the loop below tells it by identity
        timelines = ((False, self.runtime.host_pace), (True, self.runtime.host_pace_prefill)) if self.host else ()
        for prefill, points in timelines:
            if points:
                at = points[0][0]
                heappush(self.heap, (at if at > 0.0 else 0.0, next(self.seq), pace, (prefill, 0)))
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

    # ---- stages ---------------------------------------------------------------
    def arrive(self, item, rid: int) -> None:
        t, k, n_in, n_out, hit, ids = item
        rand = self.rng_route.random
        hit, drc_hit = self._arrival_hits(ids, n_in, hit)
        if k < 0 or (self.route_by_drc and drc_hit != hit):
            k = self.router.classify(n_in, n_out, drc_hit if self.route_by_drc else hit)
            if k < 0:
                self._reject(t, rid)
                return
        path, md, drc_hit = self._route(k, n_in, n_out, hit, drc_hit, ids, rand)
        req = self._new_req(rid, t, n_in, n_out, hit, ids, path, md, drc_hit, rand)
        if rid >= self.warm_n:
            if self.first_measured_t is None:
                self.first_measured_t = t
            self.hit_tokens_p += hit * n_in
            self.hit_tokens_drc += drc_hit * n_in
            self.input_tokens += n_in
        self.last_arrival_t = t
        req.p = self._pick_prefill(path, rand)
        if self.runtime is None:
            req.p.enqueue(req, t)
            return
        sent = t + self.runtime.path_overhead_s() * self.host.factor()  # the router's orders leave
        if sent > t:
            heappush(self.heap, (sent, next(self.seq), self._ev_at_p, req))
        else:
            req.p.enqueue(req, t)
        for bit, inst in ((_PULL_MD, req.md), (_PULL_RLD, req.rld)):
            if inst is not None:
                heappush(self.heap, (sent, next(self.seq), self._ev_order_sent, (req, bit)))

    def _ev_at_p(self, t: float, req) -> None:
        req.p.enqueue(req, t)

    # ---- the executor's pulls (runtime only) ------------------------------------
    def _one_way(self, req, inst, back: bool = False) -> float:
        """A message from P's datacenter to ``inst``'s (``back``: the other way) across the line (``WanLink.
        message_s``: behind the transfers crossing that direction), or 0 in process."""
        link = req.path.link
        if link is None or inst.pool.dc == req.p.pool.dc:
            return 0.0
        if not back:
            return link.message_s()
        rev = self.links.get((link.dst, link.src))
        return rev.message_s() if rev is not None else link.message_s(queued=False)

    def _ev_order_sent(self, t: float, arg) -> None:
        """The router's order for a decoder leaves, P's prefill begun (its order left first): it crosses
        beside that prefill (``WanLink.message_s``)."""
        req, bit = arg
        inst = req.md if bit == _PULL_MD else req.rld
        heappush(self.heap, (t + self._one_way(req, inst), next(self.seq), self._ev_order_at, arg))

    def _ev_order_at(self, t: float, arg) -> None:
        """The decoder's order reached it; its worker handles it — and sends ``KVPull`` to P — between
        two steps (executor/roles/md.py, rld.py: ``on_order`` → ``_pull``)."""
        req, bit = arg
        inst = req.md if bit == _PULL_MD else req.rld
        at = inst.step_boundary(t)
        heappush(self.heap, (at + self._one_way(req, inst, back=True), next(self.seq), self._ev_pull_at_p, arg))

    def _ev_pull_at_p(self, t: float, arg) -> None:
        """A pull reached P: served now if the KV is staged (between two of P's forwards: when the
        one in flight ends), else when the prefill ends (executor/roles/p.py: ``early_pulls``)."""
        req, bit = arg
        if req.pulls & bit:
            return
        req.pulls |= bit  # (MD pulls even when RLD has finished the request: its radix cache keeps the KV)
        if req.staged:
            self._serve_pull(req.p.boundary(t), req, bit)

    def _serve_pull(self, t: float, req, bit: int) -> None:
        """P exports the staged KV for the consumer that pulled it (unless its forward was charged
        with that, the pull being there when it began) and sends it."""
        path = req.path
        if not req.exported & bit:
            t += self.export_cpu_s(req, bit) * self.host.factor()
        if bit == _PULL_RLD:
            heappush(self.heap, (t, next(self.seq), self._ev_rld_arrive, req))
        elif path.link is not None:
            path.link.add(req, req.xfer, t)
        else:
            heappush(self.heap, (t, next(self.seq), self._ev_decode_arrive, req))

    def export_cpu_s(self, req, pulls: int) -> float:
        """P's CPU seconds exporting ``req``'s KV for the consumers among ``pulls``: one export each, each
        paying the fixed part and its bytes (``ExecutorRuntime.export_s``); 0 for none."""
        return sum(self.runtime.export_s(self.exported_bytes(req, bit)) for bit in (_PULL_RLD, _PULL_MD)
                   if pulls & bit)

    def exported_bytes(self, req, pulls: int = _PULL_MD | _PULL_RLD) -> float:
        """KV bytes P serialises for ``req``'s consumers among ``pulls``: what MD/D lacks, and the
        whole prompt for RLD."""
        pipe = req.path.pipe
        n = 0.0
        if pulls & _PULL_RLD and (pipe == PRLD or pipe == PRLDMD):
            n += req.n_in * self.kv
        if pulls & _PULL_MD and pipe != PRLD:
            n += req.xfer
        return n

    def _arrival_hits(self, ids, n_in: int, hit: float) -> tuple[float, float]:
        """(P-side hit, decode-side hit): from the prefix store for hash_ids, else the drawn hit less the DRC lag."""
        if ids is not None:
            matched = self.store.match_tokens(ids, n_in)
            self.store.record(matched, n_in)
            hit = matched / n_in
            return hit, hit
        drc_hit = hit - self.drc_lag if self.drc_lag else hit
        if drc_hit < 0.0:
            drc_hit = 0.0
        return hit, drc_hit

    def _route(self, k: int, n_in: int, n_out: int, hit: float, drc_hit: float, ids, rand):
        """The request's path and MD instance; with real caches, the MD whose cache holds the most
        (re-routed by what must cross when routing by the decode-side hit)."""
        router = self.router
        path = router.pick(k, rand())
        md = None
        if path.d_pool is None:
            return path, md, drc_hit
        if ids is None:
            return path, self._pick_decode(path.d_pool, rand), drc_hit
        md, drc_hit = self._pick_by_cache(path.d_pool, ids, n_in)
        if self.route_by_drc and drc_hit < hit - 0.02 and path.drc and path.link is not None:
            k2 = router.classify(n_in, n_out, drc_hit)  # route by what must cross
            if k2 >= 0 and k2 != k:
                path = router.pick(k2, rand())
                if path.d_pool is not None:
                    md, drc_hit = self._pick_by_cache(path.d_pool, ids, n_in)
                else:
                    md = None
        if md is not None and md.cache is not None:
            md.cache.record(round(drc_hit * n_in), n_in)
        return path, md, drc_hit

    def _new_req(self, rid: int, t: float, n_in: int, n_out: int, hit: float, ids, path, md, drc_hit: float,
                 rand) -> Req:
        req = Req()
        req.rid = rid
        req.t_arr = t
        req.n_in = n_in
        req.n_out = n_out
        req.hit = hit
        req.ids = ids
        req.t_first = None
        req.stage = PREFILL
        req.rld_tokens = 0
        req.dec = None
        req.flow = None
        req.kv_md = False
        req.md_pause = 0.0
        req.pulls = 0  # runtime: consumers whose KVPull has reached P (bit 1: MD/D, bit 2: RLD)
        req.staged = False  # runtime: prefill done, its KV staged at P for the pulls
        req.exported = 0  # runtime: the pulls whose export P's forward was charged with (there when it began)
        req.path = path
        req.md = md
        req.drc_hit = drc_hit
        req.rld = self._pick_decode(path.r_pool, rand) if path.r_pool is not None else None
        new = round((1.0 - hit) * n_in)
        if new < 1:
            new = 1
        req.new = req.left = new
        req.pos = n_in - new
        if path.drc:
            req.xfer = (n_in - drc_hit * n_in) * self.kv
        else:
            req.xfer = n_in * self.kv
        return req

    def _pick_prefill(self, path, rand):
        """The P instance of the path's queue: by the plan's weights (random) or the least backlog."""
        insts = path.p_insts
        if len(insts) == 1:
            return insts[0]
        if self.config.dispatch == "random":
            cum = path.p_cum
            return insts[bisect_right(cum, rand())] if cum is not None else insts[int(rand() * len(insts))]
        return min(insts, key=_backlog)

    def _pick_decode(self, pool, rand):
        insts = pool.instances
        if len(insts) == 1:
            return insts[0]
        if self.config.dispatch == "random":
            return insts[int(rand() * len(insts))]
        return min(insts, key=_decode_load)

    def _pick_by_cache(self, pool, ids, n_in: int):
        """Cache-aware choice among the decode instances of the pool's role in its datacenter:
        the longest cached prefix wins; ties go to the plan's pool, then to the least loaded."""
        best, best_m, best_rank = None, -1, None
        for inst in self.router.decoders[(pool.role, pool.dc)]:
            m = inst.cache.match_tokens(ids, n_in) if inst.cache is not None else 0
            rank = (0 if inst.pool is pool else 1, _decode_load(inst))
            if m > best_m or (m == best_m and rank < best_rank):
                best, best_m, best_rank = inst, m, rank
        return best, best_m / n_in

    def _reject(self, t: float, rid: int) -> None:
        self.rejected += 1
        if rid >= self.warm_n:
            if self.first_measured_t is None:
                self.first_measured_t = t
            self.measured += 1
            self.rejected_measured += 1
        self.last_arrival_t = t

    def prefill_done(self, req, t: float) -> None:
        if req.ids is not None:
            self.store.insert(req.ids)
        path = req.path
        pipe = path.pipe
        heap, seq = self.heap, self.seq
        rt = self.runtime
        if pipe == PA:  # aggregated: the same instance decodes, nothing moves
            req.md = self.agg_pair[req.p]
            heappush(heap, (t, next(seq), self._ev_decode_arrive, req))
            return
        if rt is not None:  # the executor's P: the KV waits, staged, for each consumer's pull
            req.staged = True
            for bit in (_PULL_RLD, _PULL_MD):
                if req.pulls & bit:
                    self._serve_pull(t, req, bit)
            return
        if pipe == PMD or pipe == PD:
            if path.link is not None:
                path.link.add(req, req.xfer, t)
            else:
                dt = req.xfer / _rdma_rate(req.p, req.md) + RDMA_LATENCY_S
                heappush(heap, (t + dt, next(seq), self._ev_decode_arrive, req))
            return
        dt = req.n_in * self.kv / _rdma_rate(req.p, req.rld) + RDMA_LATENCY_S
        heappush(heap, (t + dt, next(seq), self._ev_rld_arrive, req))
        if pipe == PRLDMD:
            path.link.add(req, req.xfer, t)

    def kv_landed(self, req, t: float) -> None:
        """The WAN line delivered ``req``'s KV; it is usable at MD at ``t``."""
        fn = self._ev_kv_at_md if req.path.pipe == PRLDMD else self._ev_decode_arrive
        heappush(self.heap, (t, next(self.seq), fn, req))

    def _import(self, inst, t: float, n_bytes: float) -> None:
        """The executor's decoder deserialises and imports the KV on its worker thread."""
        if self.runtime is not None:
            inst.stall(t, self.runtime.import_s(n_bytes) * self.host.factor())

    def _at_boundary(self, t: float, inst, handler, req) -> bool:
        """On the executor's runtime, a KV that reaches a decoder mid-step is handled when the step
        ends: re-schedule ``handler`` then and return True; False: handle it now."""
        if self.runtime is None:
            return False
        at = inst.step_boundary(t)
        if at <= t:
            return False
        heappush(self.heap, (at, next(self.seq), handler, req))
        return True

    def _ev_decode_arrive(self, t: float, req) -> None:
        if self._at_boundary(t, req.md, self._ev_decode_import, req):
            return
        self._ev_decode_import(t, req)

    def _ev_decode_import(self, t: float, req) -> None:
        md = req.md
        if req.ids is not None and md.cache is not None:
            md.cache.insert(req.ids)
        self._import(md, t, req.xfer)
        req.stage = ON_MD
        md.join(req, t, req.n_out - 1)

    def _ev_rld_arrive(self, t: float, req) -> None:
        if not req.kv_md and self._at_boundary(t, req.rld, self._ev_rld_import, req):
            return
        self._ev_rld_import(t, req)

    def _ev_rld_import(self, t: float, req) -> None:
        if req.kv_md:  # the line beat RDMA to RLD: MD decodes it all
            self.handoffs["none"] += 1
            req.stage = ON_MD
            req.md.join(req, t, req.n_out - 1)
            return
        req.stage = ON_RLD
        self._import(req.rld, t, req.n_in * self.kv)
        req.rld.join(req, t, req.n_out - 1)

    def _ev_kv_at_md(self, t: float, req) -> None:
        md = req.md
        if req.ids is not None and md.cache is not None:
            md.cache.insert(req.ids)
        self._import(md, t, req.xfer)  # the executor's MD imports the KV even when RLD finished
        stage = req.stage
        if stage == DONE:
            return
        if stage == PREFILL:
            req.kv_md = True
            return
        rld = req.rld
        if req.dec is not rld:  # still waiting for a slot on RLD: skip it
            rld.advance(t)
            if rld.unwait(req):
                self.handoffs["none"] += 1
                req.stage = ON_MD
                md.join(req, t, req.n_out - 1)
            return
        rld.advance(t)
        pending = rld.produced(req)  # decoded here; MD already has t0 (it came with the KV)
        if req.n_out - 1 - pending <= 1:
            return  # RLD is about to finish it anyway
        mode = handoff_mode(self.handoff_policy, pending, self.handoff_threshold)
        link = req.path.link
        ctx = req.n_in
        im = md.im

        def extend_s(k: int) -> float:
            if self.runtime is not None:  # Engine.extend: one forward of k tokens over the cached context
                return im.prefill_chunk_s(ctx + k, ctx, k) * self.host.factor("prefill", own="decode")
            return im.extend_s(k, ctx)

        plan = plan_handoff(mode, pending, link.message_s(), link.rate, rld.step, extend_s)
        self.handoffs[plan.mode] += 1
        req.stage = HANDOFF
        req.md_pause = plan.md_extend_s
        if plan.mode == ONE_SHOT:
            req.rld_tokens = 1 + rld.remove(req, t)
            heappush(self.heap, (t + plan.takeover_s, next(self.seq), self._ev_md_takeover, req))
        else:
            heappush(self.heap, (t + plan.takeover_s, next(self.seq), self._ev_catch_up_done, req))

    def _ev_catch_up_done(self, t: float, req) -> None:
        if req.stage == DONE:
            return
        req.rld_tokens = 1 + req.rld.remove(req, t)
        self._ev_md_takeover(t, req)

    def _ev_md_takeover(self, t: float, req) -> None:
        left = req.n_out - req.rld_tokens
        req.stage = ON_MD
        if left <= 0:
            self._finish(req, t)
            return
        req.md.join(req, t, left, req.md_pause)

    def decode_done(self, req, t: float, inst) -> None:
        if inst.role == RLD:
            # t0 and the tokens decoded here; its KV still lands on MD: the DRC keeps it for the next turn
            req.rld_tokens = 1 + req.dec_tokens
        self._finish(req, t)

    def _finish(self, req, t: float) -> None:
        req.stage = DONE
        if req.rid < self.warm_n:
            return
        ttft = req.t_first - req.t_arr
        n_out = req.n_out
        tpot = (t - req.t_first) / (n_out - 1) if n_out > 1 else 0.0
        self.ttft.add(ttft)
        self.tpot.add(tpot)
        r = req.path.route
        self.route_ttft[r].add(ttft)
        self.measured += 1
        self.tokens_total += n_out
        self.tokens_rld += req.rld_tokens
        if ttft <= self.sla_ttft and tpot <= self.sla_tpot:
            self.good += 1
            self.route_good[r] += 1


def _backlog(inst) -> int:
    return inst.backlog


def _decode_load(inst) -> int:
    return inst.B + len(inst.waiting)


def _rdma_rate(a, b) -> float:
    ra = a.im.rdma_bytes_per_s
    rb = b.im.rdma_bytes_per_s
    return ra if ra < rb else rb


def simulate(scenario, plan, config: SimConfig | None = None, progress=None):
    """Replay ``plan`` for ``scenario`` (a Scenario or a resolved Problem) in the simulator.

    Plans without per-pool ``assignments`` are first routed by
    :func:`placer.optimize.evaluate_plan` (pools fixed). A plan whose pools cannot carry
    its load (evaluate finds no routing) is replayed anyway, its routes split over its
    pools by :func:`placer.sim.assign.replayable`: the result's ``warnings`` say so and
    what the run measured going wrong (:func:`placer.sim.assign.overload_signs`). A plan
    naming a chip, datacenter or class the scenario lacks is an InputError.
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
    result = Simulation(problem, plan, config, progress).run()
    result.data["warnings"] = [*warnings, *overload_signs(result, problem.ttft_p90_s)]
    return result
