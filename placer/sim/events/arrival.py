"""Arrival and routing: a request's hits, class, path and instances.

in:  a work item ``(t, class, n_in, n_out, hit, hash_ids)`` from :mod:`placer.sim.sources`
out: a :class:`~placer.sim.events.request.Req` queued at its P instance (on the executor's runtime: the
     router's orders scheduled, :mod:`placer.sim.events.kv`), or a rejection counted

P-side hit: the class's, or the prefix store's for hash_ids; decode-side hit: the same less ``drc_lag``,
or the MD radix cache's. The class is drawn by that hit where the item has none (or routing goes by the
decode-side hit), the path from the plan (:mod:`placer.sim.router`), then the instances in each pool.
"""

from __future__ import annotations

from bisect import bisect_right
from heapq import heappush

from placer.prefix import pick_by_prefix
from placer.sim.events.request import PREFILL, PULL_MD, PULL_RLD, Req


class ArrivalEvents:
    """Mixin of :class:`~placer.sim.engine.Simulation`: a request arrives and is routed."""

    def arrive(self, item, rid: int) -> None:
        """Route the work item ``item`` as request ``rid`` and queue it at its P instance."""
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
        for bit, inst in ((PULL_MD, req.md), (PULL_RLD, req.rld)):
            if inst is not None:
                heappush(self.heap, (sent, next(self.seq), self._ev_order_sent, (req, bit)))

    def _ev_at_p(self, t: float, req) -> None:
        req.p.enqueue(req, t)

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
        """Cache-aware choice among the decode instances of the pool's role in its datacenter, the
        executor's rule (:func:`placer.prefix.pick_by_prefix`): the longest cached prefix among the
        instances within the load bound; ties go to the plan's pool, then to the least loaded."""
        hits = {id(inst): inst.cache.match_tokens(ids, n_in) if inst.cache is not None else 0
                for inst in self.router.decoders[(pool.role, pool.dc)]}
        best = pick_by_prefix(self.router.decoders[(pool.role, pool.dc)], lambda i: hits[id(i)], _decode_load,
                              rank=lambda i: (0 if i.pool is pool else 1,))
        return best, hits[id(best)] / n_in

    def _reject(self, t: float, rid: int) -> None:
        self.rejected += 1
        if rid >= self.warm_n:
            if self.first_measured_t is None:
                self.first_measured_t = t
            self.measured += 1
            self.rejected_measured += 1
        self.last_arrival_t = t


def _backlog(inst) -> int:
    return inst.backlog


def _decode_load(inst) -> int:
    return inst.B + len(inst.waiting)
