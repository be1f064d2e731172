"""Prefill (P): prompts in, prompt KV staged for the decoders that pull it.

Lifecycle of one request on P

    QUEUED ──prefill──▶ STAGED ──every consumer sent KVDone──▶ RELEASED
                           └──────────lease ran out──────────────┘

- QUEUED: a `PrefillOrder` arrived; it waits in `queue` (FIFO). The worker runs one
  prefill per loop turn, so pulls for staged requests are served between prefills.
- STAGED: `engine.prefill` reused P's cached prefix and computed the rest; the first
  token t0 is sampled (not streamed: it travels with the KV, and the first decoder
  streams it, so a transfer's cost shows in TTFT as the report measures it). The
  prompt's whole blocks are already in P's radix cache. Each consumer named in the
  order (RLD and/or MD) sends `KVPull(start)` — the first position *its own* cache
  lacks (DRC) — and gets `KVData` with KV `[start, n)` and t0. A pull that arrives
  before its order waits in `early_pulls`.
- RELEASED: when every consumer sent `KVDone` (it imported its copy, or no longer
  needs it), or when the lease (`lease_s` from the order, renewed by each pull and
  whenever a `KVData` transfer makes progress: `executor.lease`) expires — a consumer
  that vanished, or a transfer that stalls, cannot pin P's memory; a slow transfer
  that keeps moving is not cut. `engine.finish` keeps
  the whole blocks in the radix cache for the next turn.

KV ownership: P owns the prompt KV from prefill to release; a consumer owns its copy
from the moment it imported the payload. P tells the router its prefix hit
(`PrefillDone`) — the hit the request log records.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from executor.lease import Lease
from executor.roles.common import RoleWorker, sampling_from
from executor.transport.messages import (
    KVData,
    KVDone,
    KVPull,
    PrefillDone,
    PrefillOrder,
)
from placer import pdd
@dataclass
class _Staged:
    order: PrefillOrder
    request: Any  # engine Request, held until release
    first_token: int
    num_cached_tokens: int
    waiting_for: set[str]
    lease_until: float
    served: dict[str, int] = field(default_factory=dict)  # consumer → start it pulled from
    lease: Lease | None = None  # renewed by transfer progress (lease_until stays the hard floor)


class PrefillWorker(RoleWorker):
    ROLE = pdd.P

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.queue: deque[PrefillOrder] = deque()
        self.staged: dict[str, _Staged] = {}
        self.early_pulls: dict[str, list[tuple[str, KVPull, float]]] = {}
        self.orders: dict[str, PrefillOrder] = {}
        self.order_at: dict[str, float] = {}  # request → when its order reached P (for PrefillDone.queue_s)

    def handlers(self):
        return {PrefillOrder: self.on_order, KVPull: self.on_pull, KVDone: self.on_done}

    def reply_to(self, request_id: str) -> str | None:
        order = self.orders.get(request_id)
        return order.reply_to if order else None

    # ---- messages ----------------------------------------------------------------------

    def on_order(self, src: str, order: PrefillOrder) -> None:
        self.orders[order.request_id] = order
        self.order_at[order.request_id] = self.received_at
        self.queue.append(order)
        self.counters["orders"] += 1

    def on_pull(self, src: str, pull: KVPull) -> None:
        staged = self.staged.get(pull.request_id)
        if staged is None:
            self.early_pulls.setdefault(pull.request_id, []).append((src, pull, self.received_at))
            return
        self._serve_pull(staged, src, pull.start, self.received_at)

    def on_done(self, src: str, done: KVDone) -> None:
        staged = self.staged.get(done.request_id)
        if staged is None:
            return
        staged.waiting_for.discard(src)
        if not staged.waiting_for:
            self._release(done.request_id)

    # ---- work ----------------------------------------------------------------------------

    def has_work(self) -> bool:
        return bool(self.queue)

    def step(self) -> None:
        order = self.queue.popleft()
        t0 = time.perf_counter()
        queue_s = max(0.0, time.monotonic() - self.order_at.pop(order.request_id, time.monotonic()))
        try:
            result = self.engine.prefill(order.prompt, sampling_from(order.sampling))
        except Exception as exc:
            self.fail(order.request_id, f"P {self.name}: prefill failed: {type(exc).__name__}: {exc}")
            return
        prefill_s = time.perf_counter() - t0
        self.counters["prefills"] += 1
        self.counters["prefill_tokens"] += len(order.prompt) - result.num_cached_tokens
        self.counters["prefix_hit_tokens"] += result.num_cached_tokens
        staged = _Staged(order, result.request, result.first_token, result.num_cached_tokens,
                         set(order.consumers), time.monotonic() + order.lease_s)
        self.staged[order.request_id] = staged
        self.send(order.reply_to, PrefillDone(order.request_id, result.num_cached_tokens, prefill_s, self.name,
                                              queue_s))
        for src, pull, pulled_at in self.early_pulls.pop(order.request_id, []):
            self._serve_pull(staged, src, pull.start, pulled_at)
        if not staged.waiting_for:
            self._release(order.request_id)

    def _serve_pull(self, staged: _Staged, src: str, start: int, pulled_at: float) -> None:
        """Export and send the KV `[start, n)`; `pulled_at`: when the pull reached P (monotonic)."""
        n = len(staged.order.prompt)
        start = min(max(0, int(start)), n)
        t0 = time.perf_counter()
        wait_s = max(0.0, time.monotonic() - pulled_at)
        payload = self.engine.export_kv(staged.request, start, n)
        data = payload.to_bytes()
        msg = KVData(staged.order.request_id, start, n, staged.first_token, staged.num_cached_tokens, data,
                     pull_wait_s=wait_s, export_s=time.perf_counter() - t0, sent_at_unix_s=time.time())
        staged.served[src] = start
        staged.lease_until = max(staged.lease_until, time.monotonic() + staged.order.lease_s + self.kv_deadline_s)
        self.counters["kv_sent_bytes"] += len(data)
        self.counters["kv_sent_tokens"] += n - start
        t = self.send(src, msg, deadline_s=self.kv_deadline_s)
        if staged.lease is None:
            staged.lease = Lease.grant(staged.order.lease_s, time.monotonic())
        staged.lease.watch(t)

    def tick(self, now: float) -> None:
        for s in self.staged.values():
            if s.lease is not None and s.lease.observe(now):
                s.lease_until = max(s.lease_until, s.lease.expires_at)
                self.counters["leases_renewed"] += 1
        for rid in [r for r, s in self.staged.items() if now > s.lease_until]:
            self.counters["leases_expired"] += 1
            self._release(rid)
        for rid in [r for r, pulls in self.early_pulls.items() if now - pulls[0][2] > self.kv_deadline_s
                    and r not in self.orders]:
            del self.early_pulls[rid]

    def _release(self, request_id: str) -> None:
        staged = self.staged.pop(request_id, None)
        self.orders.pop(request_id, None)
        self.order_at.pop(request_id, None)
        if staged is not None:
            self.engine.finish(staged.request)
            self.counters["released"] += 1

    def drop_request(self, request_id: str) -> None:
        self.queue = deque(o for o in self.queue if o.request_id != request_id)
        self._release(request_id)
        self.early_pulls.pop(request_id, None)

    def stats_live(self) -> int:
        return len(self.staged) + len(self.queue)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "queued": len(self.queue), "staged": len(self.staged)}
