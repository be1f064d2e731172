"""One routed request while it lives: its attempts, what reached the client, and its record.

In: the request (prompt, sampling), each attempt's `Assignment`, the tokens RLD and MD
stream. Out: the client's `RequestStream` fed in index order, the attempt ids
(`rid`, `rid~1`, ...) and, at the end, the request's `RequestRecord`.

An attempt starts from scratch (nothing reached the client) or from the next
undelivered index (`offset`: a migration prefills `prompt + delivered`), so the
client's stream has no gap and no duplicate at a seam. No torch, no threads: the
router calls it under its lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from executor.dispatch import Assignment
from executor.request_log import RequestRecord
from executor.stream import RequestStream, StreamAssembler, StreamEvent


@dataclass
class LiveRequest:
    """A request in flight (the router's `live[request_id]`)."""

    stream: RequestStream
    prompt: list[int]
    sampling: dict[str, Any]
    arrival_unix_s: float = field(default_factory=time.time)
    arrival: float = field(default_factory=time.monotonic)
    instances: dict[str, str] = field(default_factory=dict)  # role → instance of the current attempt
    est_hit_tokens: int = 0  # the first attempt's predicted prefix hit on P
    assembler: StreamAssembler = field(default_factory=StreamAssembler)
    prefix_hit_tokens: int | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    last_event_at: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    unloaded: set[str] = field(default_factory=set)  # roles whose load was already given back
    attempt: int = 0
    attempt_id: str = ""
    offset: int = 0  # output index of the current attempt's first token
    streamers: set[str] = field(default_factory=set)  # instances that streamed in the current attempt
    excluded: set[str] = field(default_factory=set)
    migrations: int = 0
    retries: int = 0
    stalled_at: float = 0.0

    def __post_init__(self) -> None:
        self.last_event_at = self.arrival

    @property
    def request_id(self) -> str:
        return self.stream.request_id

    @property
    def max_tokens(self) -> int:
        return self.sampling["max_new_tokens"]

    def role_of(self, name: str | None) -> str | None:
        """The role `name` plays in the current attempt (None: not part of it)."""
        return next((r for r, n in self.instances.items() if n == name), None)

    def begin_attempt(self, assignment: Assignment) -> str:
        """Make `assignment` the current attempt; its id."""
        if self.attempt_id:
            self.attempt += 1
        self.attempt_id = self.request_id if self.attempt == 0 else f"{self.request_id}~{self.attempt}"
        self.instances = assignment.instances
        self.unloaded, self.streamers = set(), set()
        if self.attempt == 0:
            self.est_hit_tokens = assignment.est_hit_tokens
        self.last_event_at = time.monotonic()
        return self.attempt_id

    def deliver(self, start_index: int, tokens: list[int], finish_reason: str | None, info: dict[str, Any]) -> bool:
        """Tokens of the current attempt (and the figures the decoder reports with them) → the client's
        stream, in index order; whether the request is done."""
        out = self.assembler.add(self.offset + start_index, tokens, finish_reason)
        self.info.update(info)
        now = time.monotonic()
        start = self.assembler.next_index - len(out)
        for k, tok in enumerate(out):
            if self.first_token_at is None:
                self.first_token_at = now
                sent = info.get("md_t0_sent_unix_s") or info.get("rld_t0_sent_unix_s")
                if sent:  # the first token's trip from its decoder to here (where clocks agree)
                    self.info["t0_transit_s"] = round(max(0.0, time.time() - sent), 6)
            self.last_token_at = now
            self.stream.push(StreamEvent("token", start + k, tok))
        return self.assembler.done

    def record(self, finish_reason: str | None, error: str | None) -> RequestRecord:
        """What the request looked like, for the request log."""
        a = self.assembler
        n_out = a.next_index
        ttft = self.first_token_at - self.arrival if self.first_token_at is not None else None
        tpot = ((self.last_token_at - self.first_token_at) / (n_out - 1)
                if n_out > 1 and self.first_token_at is not None else None)
        extra = {**self.info, "instances": dict(self.instances), "est_hit_tokens": self.est_hit_tokens,
                 "duplicates": a.duplicates, "conflicts": a.conflicts, "migrations": self.migrations,
                 "retries": self.retries}
        return RequestRecord(self.request_id, self.arrival_unix_s, len(self.prompt), n_out,
                             self.prefix_hit_tokens or 0, self.stream.pipeline.value, ttft, tpot,
                             finish_reason or "error", error, extra)
