"""A decode instance (RelayDecode, MainDecode, or plain D): continuous batching.

Lifecycle of a request here: *waiting* (no KV room or the batch is full; FCFS) →
*decoding* (in the running batch, one token per step) → *finished*, or *handed off*
(an RLD request whose KV has reached MD: the engine removes it mid-stream).

Steps are not simulated one by one. While the batch does not change, every step takes
the same time, so the instance keeps a *step counter* v that advances at 1/step_s per
second; a request that joins at v₀ with n tokens to emit finishes at v₀ + n. Only joins,
finishes and removals are events (a heap of finish counters per instance), which is
what lets a run replay 10⁵ requests of 10³ tokens each in seconds.

Step time: the performance model's own, :meth:`placer.perfmodel.InstanceModel.step_s`
(or a measured table's, through the same method) at the batch size B and the batch's mean
context — each request costed at its mid-decode context (prompt + half its output), as
the planner does. KV reads and attention work grow linearly with context (dense
attention), so the mean context gives the batch's summed cost exactly; with sparse
attention it is the planner's approximation too. An extend-decode pass (handoff) pauses
the batch for its duration — the "hiccup" the report measures on MD.
KV room: the admission rule of :mod:`placer.kv_admission`, the planner's and the executor's: a
request reserves its whole final context (prompt + output, in whole blocks) when admitted and
holds it until it leaves; it waits while the batch is at the instance's
:attr:`~placer.perfmodel.InstanceModel.batch_cap` or the reservation does not fit, FIFO with EASY
backfilling (:func:`placer.kv_admission.admit_order`): a request that fits passes a blocked head
when it leaves by the step the head's room comes, or fits beside the head then.
First token: the first decoder of a request streams t0 (sampled by P, carried with the
KV) when it admits the request — holds its KV — as the executor does on import; no
decode step first (:func:`placer.flows.ttft_det_s`). On the executor's runtime a KV
that lands while the batch is mid-step waits for that step to end (:meth:`step_boundary`):
the executor's worker handles messages only between two steps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from heapq import heappop, heappush
from math import nextafter

from placer.kv_admission import admit_order, admits, footprint_tokens
from placer.perfmodel import DECODE_STEP_OVERHEAD_S, InstanceModel

_EPS = 1e-7
INF = float("inf")


def _held_in_order(heap: list, owner) -> Iterator[tuple[float, int]]:
    """(end step, KV tokens) of each request ``owner`` holds, in ascending order (ties by tokens, as sorting the
    pairs would), read lazily off its finish heap ``heap`` of (end step, rid, request): a heap's smallest
    unread entry is the root or a child of one already read, so k ends cost O(k log k), not the batch's sort.
    Entries of requests that left (``dec`` no longer ``owner``) are skipped, as the heap's own pops skip them."""
    n = len(heap)
    frontier = [(heap[0], 0)] if n else []
    while frontier:
        end = frontier[0][0][0]
        tied = []
        while frontier and frontier[0][0][0] == end:  # every entry of this end (children end no earlier)
            (_, _, req), i = heappop(frontier)
            if req.dec is owner:
                tied.append(req.kv_foot)
            for child in (2 * i + 1, 2 * i + 2):
                if child < n:
                    heappush(frontier, (heap[child], child))
        tied.sort()
        for tokens in tied:
            yield end, tokens


class DecodeInstance:
    __slots__ = ("engine", "im", "role", "pool", "B", "sum_ctx", "cap", "step", "v", "t_last", "pause_until",
                 "heap", "next_t", "mem_used", "mem_cap", "waiting", "busy_s", "batch_area", "q_area", "q_max",
                 "tokens", "series", "_steps", "_on_event",
                 "batch_max", "extends", "extend_s_total", "cache", "runtime", "host")

    def __init__(self, engine, im: InstanceModel, role: str, pool, series, runtime=None, host=None):
        self.engine = engine
        self.im = im
        self.role = role
        self.pool = pool
        self.series = series
        self.B = 0
        self.sum_ctx = 0.0  # Σ costed context of the requests in the batch
        self.cap = im.batch_cap
        self.step = DECODE_STEP_OVERHEAD_S
        self.v = 0.0
        self.t_last = 0.0
        self.pause_until = 0.0
        self.heap: list = []
        self.next_t = INF
        self.mem_used = 0.0
        self.mem_cap = im.kv_capacity_tokens
        self.waiting: deque = deque()
        self.busy_s = 0.0
        self.batch_area = 0.0
        self.q_area = 0.0
        self.q_max = 0
        self.tokens = 0
        self.batch_max = 0
        self.extends = 0
        self.extend_s_total = 0.0
        self._steps: dict = {}  # (B, mean context) → step seconds, memoised
        self._on_event = self.on_event
        self.cache = None  # decode-side radix cache (hash_ids workloads)
        self.runtime = runtime  # ExecutorRuntime: no batch cap, a Tokens message per request per step
        self.host = host  # the cores this instance shares (runtime only)
        if runtime is not None:
            self.cap = 1 << 30  # the executor's decoders step every decoding request
            host.decoders.append(self)

    # ---- costs -------------------------------------------------------------
    def _step_s(self) -> float:
        b = self.B
        key = (b, round(self.sum_ctx / b))
        step = self._steps.get(key)
        if step is None:
            if len(self._steps) > 100_000:
                self._steps.clear()
            step = self._steps[key] = self.im.step_s(b, key[1])
        rt = self.runtime
        if rt is not None:
            return step * self.host.factor("decode", batch=b) + b * rt.token_stream_s * self.host.factor()
        return step

    def retime(self, t: float) -> None:
        """The cores' share changed: steps from ``t`` on take the new time."""
        self.advance(t)
        self.step = self._step_s()
        self._schedule(t)

    def step_boundary(self, t: float) -> float:
        """When this decoder's worker next handles messages: at once when idle (or already between
        steps, or in an import/extend, which it does between steps), else when the step in progress
        ends (executor/roles/common.py: ``run_once`` drains the inbox, then runs one step)."""
        self.advance(t)
        if not self.B or t < self.pause_until:
            return t
        frac = self.v - int(self.v + _EPS)
        if frac <= _EPS:
            return t
        return t + (1.0 - frac) * self.step

    def stall(self, t: float, seconds: float) -> None:
        """The worker thread is busy for ``seconds`` from ``t`` (a KV import): the batch waits."""
        self.advance(t)
        base = self.pause_until if self.pause_until > t else t
        self.pause_until = base + seconds
        self._schedule(t)

    # ---- time --------------------------------------------------------------
    def advance(self, t: float) -> None:
        dt = t - self.t_last
        if dt <= 0:
            return
        b = self.B
        if b:
            self.busy_s += dt
            self.batch_area += b * dt
            start = self.t_last if self.t_last >= self.pause_until else self.pause_until
            if t > start:
                self.v += (t - start) / self.step
        if self.waiting:
            self.q_area += len(self.waiting) * dt
        self.t_last = t

    def produced(self, req) -> int:
        """Tokens ``req`` has emitted here so far (call after :meth:`advance`)."""
        return int(self.v - req.vjoin + _EPS)

    # ---- membership --------------------------------------------------------
    def join(self, req, t: float, tokens: int, pause_s: float = 0.0) -> None:
        """``req`` asks to emit ``tokens`` more tokens here; ``pause_s`` of extend-decode first."""
        self.advance(t)
        req.dec_tokens = tokens
        req.dec_pause = pause_s
        req.kv_foot = footprint_tokens(req.n_in, req.n_out)  # once: the admission scans read it per event
        if not self.waiting and admits(self.mem_used, self.mem_cap, req.kv_foot, self.B, self.cap):
            self._admit(req, t)
            self._schedule(t)
            return
        self.waiting.append(req)
        self._admit_waiting(t)  # it may pass a head that does not fit (EASY backfilling)
        if self.waiting and self.waiting[-1] is req:
            if len(self.waiting) > self.q_max:
                self.q_max = len(self.waiting)
            self.series.peak(t, len(self.waiting))
        self._schedule(t)

    def _admit(self, req, t: float) -> None:
        pause = req.dec_pause
        if pause > 0:
            base = self.pause_until if self.pause_until > t else t
            self.pause_until = base + pause
            self.extends += 1
            self.extend_s_total += pause
        req.ctx = req.n_in + (req.n_out >> 1)
        self.sum_ctx += req.ctx
        self.B += 1
        if self.B == 1 and self.host is not None:
            self.host.change(t, +1, "decode")
        if self.B > self.batch_max:
            self.batch_max = self.B
        self.mem_used += req.kv_foot
        self.step = self._step_s()
        if req.t_first is None:  # the decoder that streams t0 does so on import (flows.ttft_det_s)
            req.t_first = self.pause_until if self.pause_until > t else t
        req.vjoin = self.v
        req.dec = self
        heappush(self.heap, (self.v + req.dec_tokens, req.rid, req))

    def remove(self, req, t: float) -> int:
        """Take ``req`` out of the batch (handoff); returns the tokens it emitted here."""
        self.advance(t)
        made = self.produced(req)
        self._leave(req, t)
        if req.t_first is not None and req.t_first > t:
            req.t_first = None  # removed before its first token: the next decoder emits it
        self.tokens += made
        self._admit_waiting(t)
        self._schedule(t)
        return made

    def _leave(self, req, t: float) -> None:
        req.dec = None
        self.B -= 1
        if self.B == 0 and self.host is not None:
            self.host.change(t, -1, "decode")
        self.mem_used -= req.kv_foot
        if self.B:
            self.sum_ctx -= req.ctx
            self.step = self._step_s()
        else:
            self.sum_ctx = 0.0

    def unwait(self, req) -> bool:
        """Drop ``req`` from the admission queue; False if it was not waiting."""
        try:
            self.waiting.remove(req)
        except ValueError:
            return False
        return True

    def _admit_waiting(self, t: float) -> None:
        """Admit from the line by :func:`placer.kv_admission.admit_order` (call after :meth:`advance`): the
        head as soon as it fits, others past it when they leave by the head's shadow step or fit
        beside it then. A held request leaves at the step counter ``vjoin + dec_tokens`` (its heap key)."""
        w = self.waiting
        while w and admits(self.mem_used, self.mem_cap, w[0].kv_foot, self.B, self.cap):
            self._admit(w.popleft(), t)
        if len(w) < 2:
            return
        line = list(w)
        order = admit_order(self.mem_cap, self.mem_used, self.B, self.cap, _held_in_order(self.heap, self),
                            [(r.kv_foot, r.dec_tokens) for r in line], self.v)
        if not order:
            return
        taken = set(order)
        self.waiting = deque(r for j, r in enumerate(line) if j not in taken)
        for j in order:
            self._admit(line[j], t)

    # ---- events ------------------------------------------------------------
    def _schedule(self, t: float) -> None:
        heap = self.heap
        while heap and heap[0][2].dec is not self:
            heappop(heap)  # lazily removed (handed off)
        if not heap:
            return
        start = self.pause_until if self.pause_until > t else t
        nt = start + (heap[0][0] - self.v) * self.step
        if nt <= t:
            # what is left of the step takes less time than a float at t can add (a run far out in time): the
            # next representable instant, so that the counter moves and the request finishes there
            nt = t if heap[0][0] <= self.v + _EPS else nextafter(t, INF)
        if nt < self.next_t:
            self.next_t = nt
            eng = self.engine
            heappush(eng.heap, (nt, next(eng.seq), self._on_event, None))

    def on_event(self, t: float, _arg) -> None:
        if t != self.next_t:
            return  # superseded by an earlier event
        self.next_t = INF
        self.advance(t)
        heap = self.heap
        v = self.v + _EPS
        done = []
        while heap and heap[0][0] <= v:
            _, _, req = heappop(heap)
            if req.dec is self:
                self._leave(req, t)
                done.append(req)
        if done:
            eng = self.engine
            for req in done:
                self.tokens += req.dec_tokens
                eng.decode_done(req, t, self)
            if self.waiting:
                self._admit_waiting(t)
        self._schedule(t)

    def finish_stats(self, t: float) -> None:
        self.advance(t)
