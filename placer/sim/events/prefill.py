"""A prefill done: what leaves P, and how.

in:  a request whose last prompt token P has computed (:mod:`placer.sim.prefill` calls ``prefill_done``)
out: the next stage scheduled — A: decode on the same instance; on the executor's runtime the KV staged
     at P for each consumer's pull (:mod:`placer.sim.events.kv`); else P-MD / P-D the KV over RDMA or
     the WAN line to MD/D, P-RLD the whole KV to RLD over RDMA, P-RLD-MD both at once (RLD decodes
     eagerly, :mod:`placer.sim.events.relay`)
"""

from __future__ import annotations

from heapq import heappush

from placer.perfmodel import RDMA_LATENCY_S
from placer.sim.events.kv import rdma_rate
from placer.sim.events.request import PA, PD, PMD, PRLDMD, PULL_MD, PULL_RLD


class PrefillEvents:
    """Mixin of :class:`~placer.sim.engine.Simulation`: the end of a request's prefill."""

    def prefill_done(self, req, t: float) -> None:
        """``req``'s prefill ended at ``t`` on its P instance: its prompt enters the prefix store and its
        KV leaves for its decoders."""
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
            for bit in (PULL_RLD, PULL_MD):
                if req.pulls & bit:
                    self._serve_pull(t, req, bit)
            return
        if pipe == PMD or pipe == PD:
            if path.link is not None:
                path.link.add(req, req.xfer, t)
            else:
                dt = req.xfer / rdma_rate(req.p, req.md) + RDMA_LATENCY_S
                heappush(heap, (t + dt, next(seq), self._ev_decode_arrive, req))
            return
        dt = req.n_in * self.kv / rdma_rate(req.p, req.rld) + RDMA_LATENCY_S
        heappush(heap, (t + dt, next(seq), self._ev_rld_arrive, req))
        if pipe == PRLDMD:
            path.link.add(req, req.xfer, t)
