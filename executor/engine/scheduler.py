"""Continuous-batching scheduler: which requests run in the next forward, and how.

In: requests (`add`) and, after each forward, their next tokens (`postprocess`).
Out: a `ScheduledBatch` — a `BatchKind` and the requests in it.

Lifecycle of a request here: WAITING (queued, no blocks) → RUNNING (admitted: cached
prefix reused, blocks allocated for its pending tokens) → FINISHED (stop token or
budget reached: blocks released to the radix cache). A RUNNING request may be
preempted back to WAITING when decode runs out of blocks; its KV goes to the radix
cache, so re-admission mostly re-matches it.

Policy without chunking (`chunk_tokens` None, as in nano-vllm): admit waiting requests
first, FIFO, while the block budget (free + evictable blocks), `max_running_requests`
and `max_prefill_tokens` allow (the first always whole) — so new prompts run in a
forward of their own between the decode steps of running ones; otherwise decode every
running request, preempting the newest when a step needs a block that is not there.

Chunked prefill (`chunk_tokens` C, as SGLang and vLLM run it): every step first
reserves one token for each decoding request (preempting the newest when short), then
fills a budget of C prompt tokens: the request mid-prefill continues, then waiting
requests are admitted FIFO, the last one cut to what is left of the budget (and of the
blocks) — it stays RUNNING mid-prefill, holding blocks for the tokens with KV, and
continues next step. So a step carries the running decodes plus at most C prompt
tokens, and every decoding request advances on every step. A batch that mixes
decodes with a chunk is an EXTEND batch (decodes are extends of one token): one
forward, the attention path that serves both. A preempted request mid-prefill
releases its blocks like any other (its whole blocks with KV stay in the radix
cache, so re-admission re-matches them). No torch here.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

from executor.engine.kv_manager import BlockManager
from executor.engine.request import Request, RequestStatus


class BatchKind(enum.Enum):
    """What the forward of a batch computes."""

    PREFILL = "prefill"  # whole prompts, no cached KV (varlen causal attention)
    EXTEND = "extend"  # several new tokens over a cached prefix (extend attention)
    DECODE = "decode"  # one new token per request (paged decode attention)


@dataclass(frozen=True)
class ScheduledBatch:
    """The next forward: its kind, requests and how many of each one's pending tokens it computes.

    `num_new_tokens[i]` < `requests[i].num_pending` for a request mid-prefill (a chunk: no
    token is sampled for it); empty means every request computes all its pending tokens.
    `num_prompt_tokens` (set at construction, before the forward): the batch's tokens that
    are not one-token decodes — its prefill work.
    """

    kind: BatchKind
    requests: tuple[Request, ...]
    num_new_tokens: tuple[int, ...] = ()
    num_prompt_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        prompt = sum(n for r, n in zip(self.requests, self.new_tokens()) if not _is_decode(r, n))
        object.__setattr__(self, "num_prompt_tokens", prompt)

    def new_tokens(self) -> tuple[int, ...]:
        """Tokens each request computes in this forward."""
        return self.num_new_tokens or tuple(r.num_pending for r in self.requests)


def _is_decode(req: Request, num_new: int) -> bool:
    return num_new == 1 and req.num_kv_tokens > 0


def batch_kind_for(requests: list[Request] | tuple[Request, ...], num_new: tuple[int, ...] = ()) -> BatchKind:
    """The cheapest attention path that is correct for these requests' new tokens (default: all pending)."""
    counts = num_new or tuple(r.num_pending for r in requests)
    if all(_is_decode(r, n) for r, n in zip(requests, counts)):
        return BatchKind.DECODE
    if all(r.num_kv_tokens == 0 for r in requests):
        return BatchKind.PREFILL
    return BatchKind.EXTEND


class Scheduler:
    """Waiting and running queues over a `BlockManager`."""

    def __init__(
        self, blocks: BlockManager, max_running_requests: int, max_prefill_tokens: int,
        chunk_tokens: int | None = None,
    ) -> None:
        if chunk_tokens is not None and chunk_tokens < 1:
            raise ValueError(f"chunked_prefill_tokens must be a positive int or None, got {chunk_tokens!r}")
        self.blocks = blocks
        self.max_running_requests = max_running_requests
        self.max_prefill_tokens = max_prefill_tokens
        self.chunk_tokens = chunk_tokens
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
        if self.chunk_tokens is not None:
            return self._schedule_mixed(self.chunk_tokens)
        admitted = self._admit()
        if admitted:
            return ScheduledBatch(batch_kind_for(admitted), tuple(admitted))
        decoding = self._reserve_decode()
        if decoding:
            return ScheduledBatch(BatchKind.DECODE, tuple(decoding))
        return None

    def postprocess(self, batch: ScheduledBatch, next_tokens: list[int | None]) -> list[Request]:
        """Record each request's new token (None: mid-prefill, no token yet); finish the ones that stop."""
        finished = []
        for req, token in zip(batch.requests, next_tokens, strict=True):
            if token is None:
                continue
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

    def _schedule_mixed(self, chunk_tokens: int) -> ScheduledBatch | None:
        """Decodes first, then up to `chunk_tokens` prompt tokens (see the module docstring)."""
        work = [(r, 1) for r in self._reserve_decode()]
        budget, stuck = chunk_tokens, False
        for req in [r for r in self.running if r.num_pending > 1]:  # mid-prefill: continues first
            n = self._chunk_fits(req, budget)
            if n:
                self.blocks.grow(req, req.num_kv_tokens + n)
                work.append((req, n))
                budget -= n
            stuck = stuck or req.num_pending > n  # FIFO: nothing new is admitted past it
        while not stuck and budget and self.waiting and len(self.running) < self.max_running_requests:
            req = self.waiting[0]
            # Always compute at least the last token: its logits give the next token.
            self.blocks.acquire_prefix(req, req.num_tokens - 1)
            n = self._chunk_fits(req, budget)
            if not n:
                self.blocks.release(req)
                break
            self.waiting.popleft()
            self.blocks.grow(req, req.num_kv_tokens + n)
            req.status = RequestStatus.RUNNING
            self.running.append(req)
            work.append((req, n))
            budget -= n
        if not work:
            return None
        requests, counts = tuple(r for r, _ in work), tuple(n for _, n in work)
        return ScheduledBatch(batch_kind_for(requests, counts), requests, counts)

    def _chunk_fits(self, req: Request, budget: int) -> int:
        """Pending tokens of `req` this step may compute: within the budget and the blocks,
        keeping one block per other running request for its next decode."""
        reserve = len(self.running) - (req in self.running)
        room_blocks = len(req.block_ids) + self.blocks.num_available - reserve
        room_tokens = room_blocks * self.blocks.block_size - req.num_kv_tokens
        return max(0, min(req.num_pending, budget, room_tokens))

    def _reserve_decode(self) -> list[Request]:
        scheduled: list[Request] = []
        queue = list(self.running)
        while queue:
            req = queue.pop(0)
            if req.num_pending != 1:  # mid-prefill: its chunk is scheduled apart
                continue
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
