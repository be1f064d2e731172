"""P-RLD-MD: RelayDecode decodes first, then the token-ID handoff moves the request to MainDecode.

in:  the full KV reaching RLD over RDMA (:mod:`placer.sim.events.prefill`) and the uncached KV landing on MD
     over the line (:mod:`placer.sim.events.kv`)
out: the request on RLD at once; when its KV lands on MD, the handoff (:mod:`placer.sim.handoff`: one-shot,
     catch-up, adaptive by the tokens RLD has made) and MD takes it over — unless RLD finished it first
     (the KV still lands: MD's radix cache holds it for the session's next turn), or the line beat RDMA
     (MD decodes it all). ``rld_tokens`` counts what RLD streamed, t0 included.
"""

from __future__ import annotations

from heapq import heappush

from placer.pdd import handoff_mode
from placer.sim.events.request import DONE, HANDOFF, ON_MD, ON_RLD, PREFILL
from placer.sim.handoff import plan_handoff


class RelayEvents:
    """Mixin of :class:`~placer.sim.engine.Simulation`: the relay's decode and the handoff to MD."""

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
        """``req``'s KV landed on MD: imported there, then the request moves (or stays, see the module)."""
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
        self._hand_off(t, req)

    def _hand_off(self, t: float, req) -> None:
        """``req`` decodes on RLD and its KV is on MD: time the handoff and schedule MD's takeover."""
        rld, md = req.rld, req.md
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

        phase = rld.v - req.vjoin - pending  # how far RLD is into the step after ``pending``
        plan = plan_handoff(mode, pending, link.message_s(), link.rate, rld.step, extend_s, rld_phase=phase)
        self.handoffs[plan.mode] += 1
        req.stage = HANDOFF
        req.md_pause = plan.final_extend_s  # the final batch's extend, before MD streams on
        for at, ext in plan.md_stalls:  # earlier batches' extends stall MD's batch when they land
            heappush(self.heap, (t + at, next(self.seq), self._ev_md_extend, (md, ext)))
        heappush(self.heap, (t + plan.rld_stop_s, next(self.seq), self._ev_rld_stop, req))
        heappush(self.heap, (t + plan.takeover_s, next(self.seq), self._ev_md_takeover, req))

    def _ev_md_extend(self, t: float, arg) -> None:
        md, seconds = arg
        md.stall(t, seconds)

    def _ev_rld_stop(self, t: float, req) -> None:
        """RLD sends the final batch and stops decoding ``req`` (unless it finished it meanwhile)."""
        if req.stage == DONE:
            return
        req.rld_tokens = 1 + req.rld.remove(req, t)

    def _ev_md_takeover(self, t: float, req) -> None:
        if req.stage == DONE:  # RLD finished it before its final batch went out
            return
        left = req.n_out - req.rld_tokens
        req.stage = ON_MD
        if left <= 0:
            self._finish(req, t)
            return
        req.md.join(req, t, left, req.md_pause)
