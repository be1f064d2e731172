"""Decode on MD, D or an aggregated instance, and a request's finish.

in:  a request whose KV has reached its decoder (:mod:`placer.sim.events.kv`), or that a handoff moved to
     MD (:mod:`placer.sim.events.relay`); :class:`~placer.sim.decode.DecodeInstance` calls ``decode_done``
out: the request joins the decoder's batch (streaming t0 on admission, then n_out − 1 tokens); at its
     finish TTFT, TPOT, SLA and the route's figures go into the run's streamed sketches and counters
"""

from __future__ import annotations

from placer.pdd import RLD
from placer.sim.events.request import DONE, ON_MD


class DecodeEvents:
    """Mixin of :class:`~placer.sim.engine.Simulation`: decode on the last decoder and the finish."""

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

    def decode_done(self, req, t: float, inst) -> None:
        """``inst`` emitted ``req``'s last token at ``t``."""
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
