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
  delay after the last byte is the LinkEmulator's: one way per frame (RTT/2 + jitter,
  clamped at 0), frames of one connection released in order, and on P-MD one way more for
  the first token back to the router, in order behind the decoder's other Tokens messages; every message
  pays the socket path's latency (more while engine threads run forwards: the I/O thread waits for a core
  and the GIL), and a KV joining a connection that carries others waits behind the bytes
  buffered ahead of it before it shares the line. A small message (an order, a handoff) waits for its turn
  in the relay's frame-by-frame round-robin over the transfers crossing its direction.
* RDMA inside a datacenter: bytes over the slower NIC + a fixed latency
  (:meth:`placer.perfmodel.InstanceModel.rdma_s`), uncontended — at 400 Gbit/s per
  chip a 64K-token prompt moves in milliseconds.
"""

from __future__ import annotations

from heapq import heappop, heappush
from math import nextafter

from placer.executor_costs import frame_offsets_s, reach_s, tokens_offsets_s
from placer.pdd import P_RLD_MD
from placer.sim.router import PIPE_CODE

INF = float("inf")
_RELAYED = PIPE_CODE[P_RLD_MD]


class WanLink:
    __slots__ = ("engine", "src", "dst", "rate", "rtt_s", "jitter_s", "n", "V", "t_last", "heap", "next_t",
                 "busy_s", "bytes_total", "series", "rand_gauss", "flows", "_on_event", "peak_flows", "released")

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
        self.released: dict = {}  # executor's runtime: (P, decoder) connection → when its last KV landed

    def one_way_s(self) -> float:
        """A one-way message delay with jitter (token-ID handoffs)."""
        d = self.rtt_s / 2
        if self.jitter_s > 0:
            d += self.rand_gauss(0.0, self.jitter_s)
        return d if d > 0 else 0.0

    def message_s(self, queued: bool = True) -> float:
        """A small message's crossing in this direction (orders, pulls, token-ID handoffs): one way, and on the
        executor's runtime the socket path's latency too (``ExecutorRuntime.wan_message_s``: more while engine
        threads run forwards) and, ``queued``, its turn on the line: the emulator's relay serialises one frame at
        a time, round-robin over the transfers waiting (``executor/transport/link.py: _pace``), so a message
        joining n transfers in flight waits for the frame on the line to end (half of one, expected) and one
        frame of each of them before its own."""
        rt = getattr(self.engine, "runtime", None)
        if rt is None:
            return self.one_way_s()
        d = self.one_way_s() + rt.wan_message_s(0.0, self.engine.host.busy)
        if queued and self.n and rt.wan_frame_bytes:
            d += (0.5 + self.n) * rt.wan_frame_bytes / self.rate
        return d

    def _connection(self, req):
        """The heap entries (virtual end, rid, request) of the transfers in flight on ``req``'s connection (P's
        endpoint → the decoder's)."""
        return [e for e in self.heap if e[2].flow is self and e[2].p is req.p and e[2].md is req.md]

    def _delay(self, req, t: float, flows: int) -> float:
        """From the KV's last byte crossing at ``t`` (``flows`` transfers on the line then, this one
        included) to its landing."""
        rt = getattr(self.engine, "runtime", None)
        if rt is not None:
            # LinkEmulator: the KV's frames one way each (RTT/2 + jitter, clamped at 0), in order; on
            # P-MD the first token then crosses back to the router, one way more (placer.sim.runtime)
            busy = self.engine.host.busy
            d = self._kv_release(req, t, flows, rt.wan_frame_bytes) + rt.wan_message_s(req.xfer, busy)
            return d if req.path.pipe == _RELAYED else d + self._t0_back(req, rt) + rt.wan_message_s(0.0, busy)
        d = self.rtt_s
        if self.jitter_s > 0:
            j = self.rand_gauss(0.0, self.jitter_s)
            d += j if j > -self.rtt_s / 2 else -self.rtt_s / 2
        return d

    def _reach_s(self) -> float:
        """How much earlier than a frame another may leave and still land after it (placer.executor_costs)."""
        return reach_s(self.rtt_s, self.jitter_s)

    def _kv_release(self, req, t: float, flows: int, frame: float) -> float:
        """The emulator's in-order release of ``req``'s KV (``frame``: the transport's frame on the line; 0:
        one draw): the latest, over its connection's frames that crossed up to its last, of when each
        lands. The connection is P's endpoint → the decoder's; its frames cross ``frame × flows ÷ mine``
        apart (round robin over the transfers), and none lands before the connection's last landing."""
        d = self.one_way_s()
        if frame <= 0 or self.jitter_s <= 0:
            return d
        conn = (req.p, req.md)
        mine = 1 + len(self._connection(req))
        gap = frame * flows / (mine * self.rate)
        # the planner prices the same frames' expected release (placer.executor_costs.first_token_added_s)
        for ago in frame_offsets_s(req.xfer if mine == 1 else INF, frame, gap, self._reach_s()):
            late = self.one_way_s() - ago  # others of the connection (mine > 1): its frames go on
            if late > d:
                d = late
        last = self.released.get(conn, -INF) - t
        if last > d:
            d = last
        self.released[conn] = t + d
        return d

    def _t0_back(self, req, rt) -> float:
        """The first token's trip from the decoder back to the router: one way, in order behind the
        Tokens messages the decoder sent after each of its last steps (one per sequence,
        ``executor/roles/md.py: _advance``) — the latest sent as the KV's import began, the step before
        one step earlier, and so on."""
        d = self.one_way_s()
        dec = req.md
        if self.jitter_s <= 0 or dec is None or not dec.B or dec.step <= 0:
            return d
        for ago in tokens_offsets_s(rt.import_s(req.xfer), dec.step, dec.B, self._reach_s()):
            late = self.one_way_s() - ago
            if late > d:
                d = late
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
        """Start moving ``n_bytes`` for ``req``; the engine hears ``kv_arrived`` when they land. On the
        executor's runtime a transfer joining a connection that carries others first waits behind the
        bytes buffered ahead of it (:meth:`_hol_s`)."""
        rt = getattr(self.engine, "runtime", None)
        if rt is not None and rt.wan_hol_bytes > 0 and self.n:
            self.advance(t)
            lag = self._hol_s(req, rt.wan_hol_bytes, rt.wan_read_ahead_s * self.rate)
            if lag > 0:
                eng = self.engine
                heappush(eng.heap, (t + lag, next(eng.seq), self._ev_join, (req, n_bytes)))
                return
        self._join(req, n_bytes, t)

    def _ev_join(self, t: float, arg) -> None:
        self._join(*arg, t)

    def _hol_s(self, req, hol_bytes: float, read_ahead: float) -> float:
        """How long a transfer for ``req`` waits before the line's round-robin sees it. One connection (P's
        endpoint → the decoder's) carries all of their transfers; the relay holds up to ``read_ahead`` bytes
        of it where the round-robin sees them, and the sockets and the relay's reader before it up to
        ``hol_bytes`` more (``ExecutorRuntime.wan_hol_bytes``), already past the sender's round-robin: those
        cross first, at the connection's share of the line."""
        mine = self._connection(req)
        ahead = min(hol_bytes, sum(v_end for v_end, _, _ in mine) - len(mine) * self.V - read_ahead)
        if ahead <= 0:
            return 0.0
        return ahead * self.n / (len(mine) * self.rate)

    def _join(self, req, n_bytes: float, t: float) -> None:
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
        if nt <= t:
            # the head's last bytes cross in less time than a float at t can add (a run far out in time): the
            # next representable instant, so that time moves and they land there, not at t again and again
            nt = t if heap[0][0] <= self._landed_v() else nextafter(t, INF)
        if nt < self.next_t:
            self.next_t = nt
            eng = self.engine
            heappush(eng.heap, (nt, next(eng.seq), self._on_event, None))

    def _landed_v(self) -> float:
        """The virtual byte count up to which a transfer has landed now (rounding: a byte and a part in 10¹²)."""
        return self.V * (1 + 1e-12) + 1.0

    def on_event(self, t: float, _arg) -> None:
        if t != self.next_t:
            return
        self.next_t = INF
        self.advance(t)
        heap = self.heap
        limit = self._landed_v()
        eng = self.engine
        while heap and heap[0][0] <= limit:
            _, _, req = heappop(heap)
            if req.flow is self:
                req.flow = None
                self.n -= 1
                eng.kv_landed(req, t + self._delay(req, t, self.n + 1))
        host = getattr(eng, "host", None)
        if host is not None and self.n == 0:
            host.line(t, self, False)
        self._schedule(t)

    def finish_stats(self, t: float) -> None:
        self.advance(t)
