"""One client stream from tokens that arrive from several instances: gap-free and duplicate-free.

In: batches `(start_index, tokens)` from RLD and MD, in any order, possibly
overlapping at the handoff seam. Out: the tokens in index order, each index once, as
soon as every earlier index has arrived (`StreamAssembler`; `done` once the final
index is out), and the client's side of the request (`RequestStream`: `StreamEvent`s
— each token, then the end or an error — to iterate from a thread or an event loop; it keeps
when it was made, when each token and the end reached it: `created_at`, `token_times`,
`ended_at`, monotonic seconds, what `executor.latency_metrics` observes).

Every index has exactly one owner in the protocol (RLD up to the handoff, MD after),
so an index seen twice is a duplicate to drop; seen twice with *different* tokens it
is a conflict (counted: a protocol bug, or sampling that diverged). No torch here.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from executor.request_log import RequestRecord
from executor.routing import Pipeline


class StreamAssembler:
    """Reorders and de-duplicates one request's output tokens by index."""

    def __init__(self) -> None:
        self.next_index = 0
        self.delivered: list[int] = []
        self._buffer: dict[int, int] = {}
        self.final_index: int | None = None
        self.finish_reason: str | None = None
        self.duplicates = 0
        self.conflicts = 0

    def add(self, start_index: int, tokens: list[int], finish_reason: str | None = None) -> list[int]:
        """Take a batch; return the tokens that are now deliverable, in order."""
        if start_index < 0:
            raise ValueError(f"start_index must be >= 0, got {start_index}")
        for i, tok in enumerate(tokens, start_index):
            known = self.delivered[i] if i < self.next_index else self._buffer.get(i)
            if known is not None:
                self.duplicates += 1
                self.conflicts += int(known != tok)
                continue
            self._buffer[i] = tok
        if finish_reason is not None and self.final_index is None:
            self.final_index = start_index + len(tokens) - 1
            self.finish_reason = finish_reason
        out = []
        while self.next_index in self._buffer and (self.final_index is None or self.next_index <= self.final_index):
            tok = self._buffer.pop(self.next_index)
            out.append(tok)
            self.delivered.append(tok)
            self.next_index += 1
        return out

    def rewind(self) -> int:
        """Forget what arrived but was not delivered (a new attempt resends it); the index to resume at."""
        self._buffer.clear()
        self.final_index, self.finish_reason = None, None
        return self.next_index

    @property
    def done(self) -> bool:
        return self.final_index is not None and self.next_index > self.final_index

    @property
    def missing(self) -> list[int]:
        """Indices below the highest one seen that have not arrived (a gap, while waiting)."""
        top = max(self._buffer, default=self.next_index - 1)
        return [i for i in range(self.next_index, top) if i not in self._buffer]


@dataclass(frozen=True)
class StreamEvent:
    """`token` (index, token), `end` (finish_reason, record) or `error` (error)."""

    kind: str
    index: int = -1
    token: int = -1
    finish_reason: str | None = None
    error: str | None = None
    record: RequestRecord | None = None


class RequestStream:
    """The client's side of one request."""

    def __init__(self, request_id: str, pipeline: Pipeline, loop: asyncio.AbstractEventLoop | None) -> None:
        self.request_id, self.pipeline = request_id, pipeline
        self._q: queue.Queue[StreamEvent] = queue.Queue()
        self._loop = loop
        self._aq: asyncio.Queue[StreamEvent] | None = asyncio.Queue() if loop is not None else None
        self.tokens: list[int] = []
        self.finish_reason: str | None = None
        self.error: str | None = None
        self.record: RequestRecord | None = None
        self.created_at = time.monotonic()  # the request's arrival at the router (made in `Router.submit`)
        self.token_times: list[float] = []  # when each token was handed over, monotonic
        self.ended_at: float | None = None  # when the end or the error was
        self.closed = threading.Event()

    def push(self, ev: StreamEvent) -> None:
        """The router hands over the next event (from any thread)."""
        if ev.kind == "token":
            self.tokens.append(ev.token)
            self.token_times.append(time.monotonic())
        else:
            self.ended_at = time.monotonic()
        if ev.kind == "end":
            self.finish_reason, self.record = ev.finish_reason, ev.record
        elif ev.kind == "error":
            self.error, self.record = ev.error, ev.record
        if self._aq is not None and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._aq.put_nowait, ev)
            except RuntimeError:  # the client's loop is gone
                pass
        else:
            self._q.put(ev)
        if ev.kind != "token":
            self.closed.set()

    def events(self, timeout_s: float = 300.0) -> Iterator[StreamEvent]:
        """Blocking iteration (threads); ends after `end` or `error`."""
        while True:
            ev = self._q.get(timeout=timeout_s)
            yield ev
            if ev.kind != "token":
                return

    async def aevents(self) -> AsyncIterator[StreamEvent]:
        """Async iteration (server); ends after `end` or `error`."""
        assert self._aq is not None, "submit(..., loop=...) to stream asynchronously"
        while True:
            ev = await self._aq.get()
            yield ev
            if ev.kind != "token":
                return

    def result(self, timeout_s: float = 300.0) -> list[int]:
        """Wait for the end; the output tokens (raises RuntimeError on an error event)."""
        if not self.closed.wait(timeout_s):
            raise TimeoutError(f"request {self.request_id} did not finish within {timeout_s} s")
        if self.error is not None:
            raise RuntimeError(self.error)
        return list(self.tokens)
