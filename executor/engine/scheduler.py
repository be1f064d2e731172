"""Continuous-batching scheduler: which requests run in the next forward, and how.

In: requests (`add`) and, after each forward, their next tokens (`postprocess`).
Out: a `ScheduledBatch` — a `BatchKind` and the requests in it.

Lifecycle of a request here: WAITING (queued, no blocks) → RUNNING (admitted: cached
prefix reused, blocks allocated for its pending tokens) → FINISHED (stop token or
budget reached: blocks released to the radix cache). A RUNNING request may be
preempted back to WAITING when decode runs out of blocks; its KV goes to the radix
cache, so re-admission mostly re-matches it.

Policy (as in nano-vllm): admit waiting requests first, FIFO, while the block budget
(free + evictable blocks), `max_running_requests` and `max_prefill_tokens` allow —
so new requests join between the decode steps of running ones; otherwise decode
every running request, preempting the newest when a step needs a block that is not
there. No torch here.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from executor.engine.kv_manager import BlockManager
from executor.engine.request import Request, RequestStatus


class BatchKind(enum.Enum):
    """What the forward of a batch computes."""

    PREFILL = "prefill"  # whole prompts, no cached KV (varlen causal attention)
    EXTEND = "extend"  # several new tokens over a cached prefix (extend attention)
    DECODE = "decode"  # one new token per request (paged decode attention)


@dataclass(frozen=True)
class ScheduledBatch:
    """The next forward: its kind and requests (each computes its pending tokens)."""

    kind: BatchKind
    requests: tuple[Request, ...]


def batch_kind_for(requests: list[Request] | tuple[Request, ...]) -> BatchKind:
    """The cheapest attention path that is correct for these requests' pending tokens."""
    if all(r.num_pending == 1 and r.num_kv_tokens > 0 for r in requests):
        return BatchKind.DECODE
    if all(r.num_kv_tokens == 0 for r in requests):
        return BatchKind.PREFILL
    return BatchKind.EXTEND


class Scheduler:
    """Waiting and running queues over a `BlockManager`."""

    def __init__(
        self, blocks: BlockManager, max_running_requests: int, max_prefill_tokens: int
    ) -> None:
        self.blocks = blocks
        self.max_running_requests = max_running_requests
        self.max_prefill_tokens = max_prefill_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.num_preemptions = 0

    def add(self, req: Request) -> None:
        """Queue a request; rejects one that could never fit in the pool."""
        need = self.blocks.blocks_for(req.num_prompt_tokens + req.sampling.max_new_tokens)
        if need > self.blocks.pool.num_blocks:
            raise ValueError(
                f"request {req.request_id} needs {need} KV blocks "
                f"but the pool has {self.blocks.pool.num_blocks}"
            )
        req.status = RequestStatus.WAITING
        self.waiting.append(req)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> ScheduledBatch | None:
        """Pick the next batch, allocating its blocks; None when idle."""
        admitted = self._admit()
        if admitted:
            return ScheduledBatch(batch_kind_for(admitted), tuple(admitted))
        decoding = self._reserve_decode()
        if decoding:
            return ScheduledBatch(BatchKind.DECODE, tuple(decoding))
        return None

    def postprocess(self, batch: ScheduledBatch, next_tokens: list[int]) -> list[Request]:
        """Record each request's new token; finish and release the ones that stop."""
        finished = []
        for req, token in zip(batch.requests, next_tokens, strict=True):
            req.num_kv_tokens = req.num_tokens
            req.token_ids.append(token)
            if req.reached_stop():
                req.status = RequestStatus.FINISHED
                self.blocks.release(req)
                self.running.remove(req)
                finished.append(req)
        return finished

    # ---- internals -----------------------------------------------------------------

    def _admit(self) -> list[Request]:
        admitted: list[Request] = []
        budget_tokens = self.max_prefill_tokens
        while self.waiting and len(self.running) < self.max_running_requests:
            req = self.waiting[0]
            # Always compute at least the last token: its logits give the next token.
            match = self.blocks.peek_prefix(req.token_ids[:-1])
            cached = match.num_tokens if match else 0
            new_tokens = req.num_tokens - cached
            if admitted and new_tokens > budget_tokens:
                break
            # Lock the cached prefix first (it is then no longer evictable), then check
            # the budget, keeping one block per running request for its next decode.
            self.blocks.acquire_prefix(req, req.num_tokens - 1)
            need = self.blocks.blocks_for(req.num_tokens) - len(req.block_ids)
            if need + len(self.running) > self.blocks.num_available:
                self.blocks.release(req)
                break
            self.waiting.popleft()
            self.blocks.grow(req, req.num_tokens)
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            admitted.append(req)
            budget_tokens -= new_tokens
        return admitted

    def _reserve_decode(self) -> list[Request]:
        scheduled: list[Request] = []
        queue = list(self.running)
        while queue:
            req = queue.pop(0)
            while not self.blocks.can_grow(req, req.num_tokens):
                if queue:
                    self._preempt(queue.pop())  # the newest other request
                else:
                    self._preempt(req)
                    break
            else:
                self.blocks.grow(req, req.num_tokens)
                scheduled.append(req)
        return scheduled

    def _preempt(self, req: Request) -> None:
        self.blocks.release(req)
        self.running.remove(req)
        req.status = RequestStatus.WAITING
        self.waiting.appendleft(req)
        self.num_preemptions += 1
