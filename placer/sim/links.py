"""Network paths: a WAN line as a shared pipe, RDMA inside a datacenter.

* :class:`WanLink` — one direction of a line. Concurrent KV transfers share its rate
  equally (processor sharing, as parallel TCP flows do): with n flows each moves at
  C/n, so a burst of transfers slows every one of them. Implemented with a virtual
  byte counter V advancing at C/n per flow; a flow of b bytes started at V₀ ends at
  V₀ + b. After its last byte, a transfer still pays the line's round trip (request
  and acknowledgement of the transfer protocol) plus Gaussian jitter (``jitter_ms`` is
  the standard deviation of the one-way delay). Time-average M/G/1-PS sojourn is
  b/(C(1−ρ)), the mean :func:`placer.queueing.wan_transfer_s` predicts; the
  simulator adds its spread. On the executor's runtime (:mod:`placer.sim.runtime`) the
  delay after the last byte is the LinkEmulator's: one way (RTT/2 + jitter, clamped at
  0) for the KV, and on P-MD one way more for the first token back to the router.
* RDMA inside a datacenter: bytes over the slower NIC + a fixed latency
  (:meth:`placer.perfmodel.InstanceModel.rdma_s`), uncontended — at 400 Gbit/s per
  chip a 64K-token prompt moves in milliseconds.
"""

from __future__ import annotations

from heapq import heappop, heappush

from placer.flows import P_RLD_MD
from placer.sim.router import PIPE_CODE

INF = float("inf")
_RELAYED = PIPE_CODE[P_RLD_MD]


class WanLink:
    __slots__ = ("engine", "src", "dst", "rate", "rtt_s", "jitter_s", "n", "V", "t_last", "heap", "next_t",
                 "busy_s", "bytes_total", "series", "rand_gauss", "flows", "_on_event", "peak_flows")

    def __init__(self, engine, src: str, dst: str, bytes_per_s: float, rtt_s: float, jitter_s: float, series,
                 rng):
        self.engine = engine
        self.src, self.dst = src, dst
        self.rate = bytes_per_s
        self.rtt_s = rtt_s
        self.jitter_s = jitter_s
        self.n = 0
        self.V = 0.0
        self.t_last = 0.0
        self.heap: list = []
        self.next_t = INF
        self.busy_s = 0.0
        self.bytes_total = 0.0
        self.series = series  # bytes per bin (mode 'sum')
        self.rand_gauss = rng.gauss
        self.flows = 0
        self.peak_flows = 0
        self._on_event = self.on_event

    def one_way_s(self) -> float:
        """A one-way message delay with jitter (token-ID handoffs)."""
        d = self.rtt_s / 2
        if self.jitter_s > 0:
            d += self.rand_gauss(0.0, self.jitter_s)
        return d if d > 0 else 0.0

    def _delay(self, req) -> float:
        if getattr(self.engine, "runtime", None) is not None:
            # LinkEmulator: the KV's last frame one way (RTT/2 + jitter, clamped at 0); on P-MD the
            # first token then crosses back to the router, one way more (placer.sim.runtime)
            d = self.one_way_s()
            return d if req.path.pipe == _RELAYED else d + self.one_way_s()
        d = self.rtt_s
        if self.jitter_s > 0:
            j = self.rand_gauss(0.0, self.jitter_s)
            d += j if j > -self.rtt_s / 2 else -self.rtt_s / 2
        return d

    def advance(self, t: float) -> None:
        dt = t - self.t_last
        if dt > 0:
            if self.n:
                self.V += dt * self.rate / self.n
                self.busy_s += dt
                self.bytes_total += dt * self.rate
                self.series.add_span(self.t_last, t, self.rate)
            self.t_last = t

    def add(self, req, n_bytes: float, t: float) -> None:
        """Start moving ``n_bytes`` for ``req``; the engine hears ``kv_arrived`` when they land."""
        self.advance(t)
        self.n += 1
        self.flows += 1
        if self.n > self.peak_flows:
            self.peak_flows = self.n
        req.flow = self
        heappush(self.heap, (self.V + n_bytes, req.rid, req))
        host = getattr(self.engine, "host", None)
        if host is not None and self.n == 1:
            host.line(t, self, True)  # the executor's I/O thread moves the bytes (placer.sim.runtime)
        self._schedule(t)

    def _schedule(self, t: float) -> None:
        heap = self.heap
        if not heap:
            return
        nt = t + (heap[0][0] - self.V) * self.n / self.rate
        if nt < t:
            nt = t
        if nt < self.next_t:
            self.next_t = nt
            eng = self.engine
            heappush(eng.heap, (nt, next(eng.seq), self._on_event, None))

    def on_event(self, t: float, _arg) -> None:
        if t != self.next_t:
            return
        self.next_t = INF
        self.advance(t)
        heap = self.heap
        limit = self.V * (1 + 1e-12) + 1.0
        eng = self.engine
        while heap and heap[0][0] <= limit:
            _, _, req = heappop(heap)
            if req.flow is self:
                req.flow = None
                self.n -= 1
                eng.kv_landed(req, t + self._delay(req))
        host = getattr(eng, "host", None)
        if host is not None and self.n == 0:
            host.line(t, self, False)
        self._schedule(t)

    def finish_stats(self, t: float) -> None:
        self.advance(t)
