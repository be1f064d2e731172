"""KV movement: from P to the decoders, and on the executor's runtime the messages that pace it.

in:  a request whose KV is on its way (:mod:`placer.sim.events.prefill`), a WAN line's landing
     (:class:`~placer.sim.links.WanLink` calls ``kv_landed``)
out: the KV's arrival scheduled at its decoder (:mod:`placer.sim.events.decode`, and
     :mod:`placer.sim.events.relay` on P-RLD-MD); a decoder's import charged to its worker

Inside a datacenter the KV goes over RDMA (the slower NIC's rate and a fixed latency), across datacenters
over the line. On the executor's runtime (:mod:`placer.sim.runtime`) each decoder pulls its KV when it
handles the router's order, between two of its steps, and P sends the KV when both its prefill and that
pull are done, exporting it for each consumer on its worker thread; a decoder imports it between two
steps.
"""

from __future__ import annotations

from heapq import heappush

from placer.sim.events.request import PRLD, PRLDMD, PULL_MD, PULL_RLD


class KvEvents:
    """Mixin of :class:`~placer.sim.engine.Simulation`: the KV's way from P to its decoders."""

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
        inst = req.md if bit == PULL_MD else req.rld
        heappush(self.heap, (t + self._one_way(req, inst), next(self.seq), self._ev_order_at, arg))

    def _ev_order_at(self, t: float, arg) -> None:
        """The decoder's order reached it; its worker handles it — and sends ``KVPull`` to P — between
        two steps (executor/roles/md.py, rld.py: ``on_order`` → ``_pull``)."""
        req, bit = arg
        inst = req.md if bit == PULL_MD else req.rld
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
        if bit == PULL_RLD:
            heappush(self.heap, (t, next(self.seq), self._ev_rld_arrive, req))
        elif path.link is not None:
            path.link.add(req, req.xfer, t)
        else:
            heappush(self.heap, (t, next(self.seq), self._ev_decode_arrive, req))

    def export_cpu_s(self, req, pulls: int) -> float:
        """P's CPU seconds exporting ``req``'s KV for the consumers among ``pulls``: one export each, each
        paying the fixed part and its bytes (``ExecutorRuntime.export_s``); 0 for none."""
        return sum(self.runtime.export_s(self.exported_bytes(req, bit)) for bit in (PULL_RLD, PULL_MD)
                   if pulls & bit)

    def exported_bytes(self, req, pulls: int = PULL_MD | PULL_RLD) -> float:
        """KV bytes P serialises for ``req``'s consumers among ``pulls``: what MD/D lacks, and the
        whole prompt for RLD."""
        pipe = req.path.pipe
        n = 0.0
        if pulls & PULL_RLD and (pipe == PRLD or pipe == PRLDMD):
            n += req.n_in * self.kv
        if pulls & PULL_MD and pipe != PRLD:
            n += req.xfer
        return n


def rdma_rate(a, b) -> float:
    """Bytes/s between instances ``a`` and ``b`` inside a datacenter: the slower NIC's."""
    ra = a.im.rdma_bytes_per_s
    rb = b.im.rdma_bytes_per_s
    return ra if ra < rb else rb
