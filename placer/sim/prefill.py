"""A Prefill (P) instance: FCFS queue, chunked prefill, batching of short prompts.

Lifecycle of a request at P: *queued* → *prefilling* (one forward per chunk of at most
``chunk`` new tokens; a request that is being chunked stays at the head of the queue
until its last chunk) → *done* (KV staged for the transfer; the engine takes over).

A forward is costed on the roofline of :meth:`placer.perfmodel.InstanceModel.prefill_chunk_s`
per chunk: FLOPs = 2·active·t + attention over positions [pos, pos+t); memory = one
weight read + the prompt's KV; time = max(FLOPs/F, bytes/M) (+ or max with the
collectives) + a fixed chunk overhead. Short *fresh* prompts are packed FCFS into one
forward up to ``chunk`` tokens (they share the weight read: FLOPs and KV bytes add up,
the weights are read once). The *tail chunk* of a chunked prompt — the remainder after
its full chunks — runs alone (``batch_tail`` False): a small tail still pays a whole
weight read, which is the throughput the BCR curve's dips lose. The analytic model
prices each request alone (no packing), so at P the simulator is never slower than it.
With pipeline stages (``im.pp`` > 1) a forward's time is one stage's; a finished prompt's
last chunk still crosses the other stages (:meth:`~placer.perfmodel.InstanceModel.pipeline_fill_s`)
before the engine takes over, while the first stage already starts the next forward (the
analytic model charges that fill as busy time: conservative).
A measured table (:class:`~placer.profiles.measured.MeasuredInstanceModel`) answers a
prompt's forward through ``prefill_chunk_s``; a pack is the roofline pack scaled by
measured ÷ roofline of its prompts alone.

On the executor's runtime (``SimConfig.runtime``, :mod:`placer.sim.runtime`) P is the
executor's: one request per forward (all its uncached tokens, no chunking, no packing),
then the KV exported on the same thread for the consumers whose pull had come when the
forward began (a later pull is exported when it comes: the engine adds that time to the
KV's departure), the whole slowed by the cores it shares (:class:`~placer.sim.runtime.Host`).
"""

from __future__ import annotations

from collections import deque
from heapq import heappush

from placer.perfmodel import InstanceModel

_MEMO_LIMIT = 200_000


class PrefillInstance:
    __slots__ = ("engine", "im", "chunk", "queue", "busy", "busy_s", "backlog", "q_area", "q_t", "q_max",
                 "series", "batch_tail", "_memo", "_w", "forwards", "pool", "last_dt", "runtime", "host",
                 "cpu_left", "t_from", "fac", "version", "t_started", "inflight")

    def __init__(self, engine, im: InstanceModel, pool, series, batch_tail: bool = False, runtime=None, host=None):
        self.engine = engine
        self.im = im
        self.pool = pool
        self.chunk = im.prefill_chunk_tokens
        self.queue: deque = deque()
        self.busy = False
        self.busy_s = 0.0
        self.backlog = 0  # new tokens queued or in service (least-work dispatch)
        self.q_area = 0.0
        self.q_t = 0.0
        self.q_max = 0
        self.series = series
        self.batch_tail = batch_tail
        self.forwards = 0
        self._memo: dict = {}
        self._w = im.weight_bytes
        self.last_dt = 0.0  # seconds of the forward in flight (a pipeline's fill follows its last chunk)
        self.runtime = runtime  # ExecutorRuntime: one request per forward, KV export on this thread
        self.host = host  # the cores this instance shares (runtime only)
        self.cpu_left = 0.0  # runtime: CPU seconds left of the forward (+ export) in flight
        self.t_from = 0.0  # ... as of this time, at this wall-per-CPU factor:
        self.fac = 1.0
        self.version = 0  # the forward's done event in the heap (re-timed: the older is stale)
        self.t_started = 0.0
        self.inflight = None  # runtime: the request whose forward is in flight
        if runtime is not None:
            self.chunk = float("inf")  # Engine.prefill forwards all uncached tokens at once
            host.prefills.append(self)

    # ---- costs -------------------------------------------------------------
    def _parts(self, n_in: int, pos: int, tokens: int) -> tuple[float, float, float]:
        """(FLOPs, memory bytes besides the weights, seconds alone) of one chunk (memoised)."""
        key = (n_in, pos, tokens)
        p = self._memo.get(key)
        if p is None:
            if len(self._memo) > _MEMO_LIMIT:
                self._memo.clear()
            flops, mem = self.im.prefill_chunk_parts(n_in, pos, tokens)
            # prefill_chunk_s: a measured table's time where it covers the chunk, else this roofline
            p = self._memo[key] = (flops, mem, self.im.prefill_chunk_s(n_in, pos, tokens))
        return p

    def alone_s(self, n_in: int, new_tokens: int) -> float:
        """Seconds to prefill one request alone (all its chunks back to back)."""
        pos, left, total = n_in - new_tokens, new_tokens, 0.0
        while left > 0:
            t = min(left, self.chunk)
            total += self._parts(n_in, pos, t)[2]
            pos += t
            left -= t
        return total

    # ---- queue -------------------------------------------------------------
    def enqueue(self, req, t: float) -> None:
        q = self.queue
        self.q_area += len(q) * (t - self.q_t)
        self.q_t = t
        q.append(req)
        self.backlog += req.left
        if len(q) > self.q_max:
            self.q_max = len(q)
        if self.busy:
            self.series.peak(t, len(q))
        else:
            self._start(t)

    def _start(self, t: float) -> None:
        q = self.queue
        self.q_area += len(q) * (t - self.q_t)
        self.q_t = t
        head = q.popleft()
        left, chunk = head.left, self.chunk
        if self.runtime is not None:
            self._start_alone(t, head)
            return
        if left >= chunk:
            dt = self._parts(head.n_in, head.pos, chunk)[2]
            batch = (head,)
        elif (not self.batch_tail and head.pos > head.n_in - head.new) or not q or q[0].left > chunk - left:
            # a tail chunk (runs alone), or nothing else fits
            dt = self._parts(head.n_in, head.pos, left)[2]
            batch = (head,)
        else:
            flops, mem, alone = self._parts(head.n_in, head.pos, left)
            roof = self.im.forward_s(flops, self._w + mem, left)
            batch = [head]
            budget = chunk - left
            tokens = left
            while q:
                nxt = q[0]
                if nxt.left > budget:
                    break
                q.popleft()
                f, m, a = self._parts(nxt.n_in, nxt.pos, nxt.left)
                flops += f
                mem += m
                alone += a
                roof += self.im.forward_s(f, self._w + m, nxt.left)
                budget -= nxt.left
                tokens += nxt.left
                batch.append(nxt)
            # the pack on the roofline, scaled by measured / roofline of its prompts alone
            dt = self.im.forward_s(flops, self._w + mem, tokens) * (alone / roof)
        self.busy = True
        self.last_dt = dt
        self.busy_s += dt
        self.forwards += 1
        eng = self.engine
        heappush(eng.heap, (t + dt, next(eng.seq), self._done, batch))

    def _start_alone(self, t: float, req) -> None:
        """The executor's P: this prompt's uncached tokens in one forward, then the KV exported and
        serialised for each consumer's pull — CPU seconds turned into wall seconds by the cores it
        shares, re-timed whenever the number of busy instances changes (:meth:`retime`)."""
        req.exported = req.pulls  # the pulls already here are served on this thread right after the forward
        self.cpu_left = self._parts(req.n_in, req.pos, req.left)[2] + self.engine.export_cpu_s(req, req.pulls)
        self.busy = True
        self.t_from = self.t_started = t
        self.forwards += 1
        self.inflight = req
        self.host.change(t, +1, "prefill")  # re-times every busy instance, this one included

    def boundary(self, t: float) -> float:
        """When this P's worker next handles messages: now when idle, else when the forward in
        flight ends (runtime: the executor's ``run_once`` drains its inbox between two prefills)."""
        if self.runtime is None or not self.busy:
            return t
        return max(t, self.t_from + self.cpu_left * self.fac)

    def retime(self, t: float) -> None:
        """The cores' share changed at ``t``: the rest of the forward runs at the new factor."""
        if t > self.t_from:
            self.cpu_left -= (t - self.t_from) / self.fac
            if self.cpu_left < 0.0:
                self.cpu_left = 0.0
            self.t_from = t
        self.fac = self.host.factor("prefill")
        self.version += 1
        eng = self.engine
        heappush(eng.heap, (t + self.cpu_left * self.fac, next(eng.seq), self._done_alone,
                            (self.version, self.inflight)))

    def _done_alone(self, t: float, arg) -> None:
        version, req = arg
        if version != self.version:
            return  # re-timed since: a later event finishes it
        self.busy_s += t - self.t_started
        self.busy = False
        self.host.change(t, -1, "prefill")
        self.inflight = None
        self.backlog -= req.left
        req.pos += req.left
        req.left = 0
        self.engine.prefill_done(req, t)
        if self.queue:
            self._start(t)

    def _done(self, t: float, batch) -> None:
        chunk = self.chunk
        eng = self.engine
        for req in batch:
            used = req.left if req.left <= chunk else chunk
            req.left -= used
            req.pos += used
            self.backlog -= used
            if req.left > 0:
                self.q_area += len(self.queue) * (t - self.q_t)
                self.q_t = t
                self.queue.appendleft(req)  # keeps chunking: FCFS, head of the line
            elif self.im.pp > 1:  # the last chunk still crosses the other stages; the first takes the next
                fill = self.im.pipeline_fill_s(self.last_dt, used)
                heappush(eng.heap, (t + fill, next(eng.seq), self._filled, req))
            else:
                eng.prefill_done(req, t)
        self.busy = False
        if self.queue:
            self._start(t)

    def _filled(self, t: float, req) -> None:
        self.engine.prefill_done(req, t)

    def finish_stats(self, t: float) -> None:
        self.q_area += len(self.queue) * (t - self.q_t)
        self.q_t = t
