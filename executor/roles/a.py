"""Aggregated (A): one instance prefills and decodes its requests; no KV leaves it.

Lifecycle of one request on A

    WAITING ──admitted──▶ RUNNING ──first token──▶ STREAMING ──EOS / budget──▶ FINISHED
       ▲                     │
       └────preempted────────┘           any state ──Cancel──▶ dropped (blocks released)

- WAITING: a `PrefillOrder` with no consumers arrived (pipeline A: the router's one
  order); the request is queued in the engine's continuous-batching scheduler
  (`engine.submit`), which refuses at once a request its KV pool could never hold.
- RUNNING: the scheduler admitted it: its cached prefix is reused from A's radix cache
  (the prefix hit it reports), and the worker's `step`s (each one `engine.step`: a batch
  the scheduler picked) compute its prompt's KV in chunks of at most the engine's
  `chunked_prefill_tokens` (the plan's A queue chunk, `InstanceSpec.engine_config`),
  each chunk riding in the same forward as the decode step of every streaming request
  (chunked prefill: their TPOT grows by a chunk's work, not by a whole prompt's);
  blocks are allocated chunk by chunk, and the step of the last chunk samples t0. A
  running request may be preempted back to WAITING when the pool runs short (mid-prefill
  too): its tokens stay, its whole blocks with KV go to the radix cache, and
  re-admission re-matches them.
- STREAMING: after the step that sampled t0, A tells the router its prefix hit and the
  seconds of the steps that carried its chunks (`PrefillDone`) and streams `Tokens` from
  index 0 itself — nothing moves to another instance, so TTFT is A's queue and prefill.
  Each later step streams the new token.
- FINISHED: at EOS or the budget the scheduler releases the request: its whole blocks
  (prompt and output) stay in the radix cache for the next turn, the rest go back to
  the pool; the last `Tokens` carries the finish reason.

KV ownership: A owns the request's KV from admission to the end; the scheduler holds
the request (`submit`/`step`), the worker only maps it to its order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from executor.roles.common import RoleWorker, sampling_from, stop_reason
from executor.transport.messages import PrefillDone, PrefillOrder, RequestError, Tokens
from placer import pdd
@dataclass
class _Agg:
    order: PrefillOrder
    request: Any  # the engine's Request, held by its scheduler
    streamed: int = 0  # next output index to stream
    prefill_s: float = 0.0  # seconds of the steps that computed its prompt's chunks
    arrived_at: float = field(default_factory=time.monotonic)


class AggregatedWorker(RoleWorker):
    ROLE = pdd.AGG

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.aggs: dict[str, _Agg] = {}

    def handlers(self):
        return {PrefillOrder: self.on_order}

    def reply_to(self, request_id: str) -> str | None:
        agg = self.aggs.get(request_id)
        return agg.order.reply_to if agg else None

    def on_order(self, src: str, order: PrefillOrder) -> None:
        self.counters["orders"] += 1
        if order.consumers:
            self._refuse(order, f"an aggregated instance keeps its KV, but the order names consumers {order.consumers}")
            return
        try:
            req = self.engine.submit(order.prompt, sampling_from(order.sampling))
        except ValueError as exc:  # e.g. more KV than the pool holds, a token outside the vocabulary
            self._refuse(order, str(exc))
            return
        self.aggs[order.request_id] = _Agg(order, req)

    def _refuse(self, order: PrefillOrder, error: str) -> None:
        self.counters["requests_failed"] += 1
        self.send(order.reply_to, RequestError(order.request_id, self.name, f"A {self.name}: {error}"))

    # ---- work ----------------------------------------------------------------------------

    def has_work(self) -> bool:
        return self.engine.scheduler.has_work()

    def step(self) -> None:
        prefilling = {id(a.request): a.request.num_kv_tokens for a in self.aggs.values() if not a.request.output_ids}
        t0 = time.perf_counter()
        stepped = {id(req) for req, _ in self.engine.step()}
        step_s = time.perf_counter() - t0
        self.counters["steps"] += 1
        for agg in self.aggs.values():
            kv_before = prefilling.get(id(agg.request))
            if kv_before is not None and (id(agg.request) in stepped or agg.request.num_kv_tokens > kv_before):
                agg.prefill_s += step_s  # a chunk of its prompt rode in this step
        for agg in [a for a in self.aggs.values() if id(a.request) in stepped]:
            self._advance(agg)

    def _advance(self, agg: _Agg) -> None:
        """Stream the tokens the router has not seen; report the prefill with t0; forget it at the end."""
        req, order = agg.request, agg.order
        outputs = req.output_ids
        if agg.streamed == 0 and outputs:
            self.counters["prefills"] += 1
            self.counters["prefill_tokens"] += len(order.prompt) - req.num_cached_tokens
            self.counters["prefix_hit_tokens"] += req.num_cached_tokens
            self.send(order.reply_to, PrefillDone(order.request_id, req.num_cached_tokens, agg.prefill_s, self.name))
        reason = stop_reason(req)
        new = outputs[agg.streamed :]
        if new or reason:
            info = {"a_cached_tokens": req.num_cached_tokens,
                    "a_time_s": time.monotonic() - agg.arrived_at} if reason else {}
            self.send(order.reply_to, Tokens(order.request_id, agg.streamed, new, self.name, reason, info))
            self.counters["tokens_streamed"] += len(new)
            agg.streamed = len(outputs)
        if reason is not None:
            self.counters["finished_here"] += 1
            self.aggs.pop(order.request_id, None)

    def on_step_error(self, exc: Exception) -> None:
        for rid in list(self.aggs):
            self.fail(rid, f"A {self.name}: step failed: {type(exc).__name__}: {exc}")

    def drop_request(self, request_id: str) -> None:
        agg = self.aggs.pop(request_id, None)
        if agg is not None:
            self.engine.finish(agg.request)

    def stats_live(self) -> int:
        return len(self.aggs)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "live": len(self.aggs), "waiting": len(self.engine.scheduler.waiting),
                "running": len(self.engine.scheduler.running),
                "chunked_prefill_tokens": self.engine.config.chunked_prefill_tokens}
