"""The router: registered instances in, one pipeline per request, one clean stream out.

In: prompts (token ids) with sampling settings; instances that register and
unregister (name, role, datacenter, chip, address); `Tokens` / `PrefillDone` /
`RequestError` messages from the instances. Out: a `RequestStream` per request
(tokens in index order, each once, then the end or an error) and a `RequestRecord`
per request for the request log.

Per request: pick P (the one whose prefix index predicts the longest hit, then the
least loaded), predict the hit, choose the pipeline with the `RoutingPolicy`, pick
RLD in P's datacenter and MD (longest predicted DRC hit, then least loaded), send
the orders (`PrefillOrder`, `RelayOrder`, `MainOrder`), and assemble what RLD and
MD stream (`StreamAssembler`: gap-free, duplicate-free across the handoff seam).
A request with no token for `request_timeout_s` ends with an error — nothing hangs.
Instances come and go with `register` / `unregister` (a new address under an old
name replaces the old one); only registered instances get new requests.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from executor.handoff import HandoffPolicy
from executor.request_log import BatchingRequestLog, RequestRecord
from executor.routing import NoRouteError, Pipeline, PrefixIndex, RoutingPolicy
from executor.stream import StreamAssembler
from executor.transport.base import Endpoint, PeerInfo
from executor.transport.messages import (
    Cancel,
    MainOrder,
    Message,
    PrefillDone,
    PrefillOrder,
    RelayOrder,
    RequestError,
    Tokens,
)

log = logging.getLogger("executor.router")

ROLES = ("P", "RLD", "MD", "D")


@dataclass(frozen=True)
class InstanceInfo:
    """A serving instance as the router knows it."""

    name: str
    role: str
    datacenter: str
    chip: str = "cpu"
    tp: int = 1
    address: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")


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
        self.closed = threading.Event()

    def _push(self, ev: StreamEvent) -> None:
        if ev.kind == "token":
            self.tokens.append(ev.token)
        elif ev.kind == "end":
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

    async def aevents(self):
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


@dataclass
class _Live:
    stream: RequestStream
    prompt_len: int
    max_tokens: int
    arrival_unix_s: float
    arrival: float
    instances: dict[str, str]
    est_hit_tokens: int
    assembler: StreamAssembler = field(default_factory=StreamAssembler)
    prefix_hit_tokens: int | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    last_event_at: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    prompt: list[int] = field(default_factory=list)
    unloaded: set[str] = field(default_factory=set)  # roles whose load was already given back


class Router:
    """Routes requests over registered instances and assembles their streams."""

    _ids = itertools.count()

    def __init__(self, endpoint: Endpoint, policy: RoutingPolicy, handoff: HandoffPolicy | None = None, *,
                 block_size: int = 16, request_log: BatchingRequestLog | None = None,
                 request_timeout_s: float = 120.0, lease_s: float = 30.0, directory: Any = None) -> None:
        self.endpoint, self.policy = endpoint, policy
        self.handoff = handoff or HandoffPolicy()
        self.name = endpoint.name
        self.block_size = block_size
        self.request_log = request_log
        self.request_timeout_s, self.lease_s = request_timeout_s, lease_s
        self.directory = directory
        self.instances: dict[str, InstanceInfo] = {}
        self.load: Counter[str] = Counter()
        self.indexes: dict[str, PrefixIndex] = {}
        self.live: dict[str, _Live] = {}
        self.records: deque[RequestRecord] = deque(maxlen=10_000)  # the latest, also sent to the request log
        self.counters: Counter[str] = Counter()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        endpoint.set_handler(self._on_message)
        self._watchdog = threading.Thread(target=self._watch, name="router-watchdog", daemon=True)
        self._watchdog.start()

    # ---- registry ----------------------------------------------------------------------

    def register(self, info: InstanceInfo) -> None:
        """Add (or replace) an instance; it gets new requests from now on."""
        with self._lock:
            old = self.instances.get(info.name)
            self.instances[info.name] = info
            if old is None or old.address != info.address:
                self.indexes[info.name] = PrefixIndex(self.block_size)
            if self.directory is not None:
                self.directory.add(PeerInfo(info.name, info.datacenter, info.address))
            self.counters["registered"] += 1

    def unregister(self, name: str) -> None:
        """Stop sending new requests to `name` (requests it holds go on)."""
        with self._lock:
            self.instances.pop(name, None)
            self.indexes.pop(name, None)
            self.counters["unregistered"] += 1

    def by_role(self, role: str, datacenter: str | None = None) -> list[InstanceInfo]:
        with self._lock:
            return [i for i in self.instances.values()
                    if i.role == role and (datacenter is None or i.datacenter == datacenter)]

    # ---- submitting --------------------------------------------------------------------

    def submit(self, prompt: Sequence[int], sampling: Any, *, request_id: str | None = None,
               loop: asyncio.AbstractEventLoop | None = None) -> RequestStream:
        """Route one request; returns its stream at once (tokens follow)."""
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("prompt must not be empty")
        s = _sampling_dict(sampling)
        rid = request_id or f"req-{next(self._ids)}-{int(time.time() * 1000) % 100000}"
        with self._lock:
            p = self._pick(self.by_role("P"), prompt)
            if p is None:
                raise NoRouteError("no prefill (P) instance is registered")
            est_hit = self.indexes[p.name].match(prompt)
            pipeline = self.policy.choose(len(prompt), est_hit, s["max_new_tokens"], self._available(p))
            rld = self._pick(self.by_role("RLD", p.datacenter)) if pipeline.uses_relay else None
            decoders = self.by_role("D") if pipeline is Pipeline.P_D else self.by_role("MD")
            md = self._pick(decoders, prompt) if pipeline.uses_main else None
            stream = RequestStream(rid, pipeline, loop)
            now = time.monotonic()
            live = _Live(stream, len(prompt), s["max_new_tokens"], time.time(), now,
                         {"P": p.name, **({"RLD": rld.name} if rld else {}), **({"MD": md.name} if md else {})},
                         est_hit, last_event_at=now, prompt=prompt)
            self.live[rid] = live
            for inst in (p, rld, md):
                if inst is not None:
                    self.load[inst.name] += 1
            self.indexes[p.name].insert(prompt)
            if md is not None:
                self.indexes[md.name].insert(prompt)
            self.counters[f"pipeline_{pipeline.value}"] += 1
        consumers = [i.name for i in (rld, md) if i is not None]
        self.endpoint.send(p.name, PrefillOrder(rid, prompt, s, consumers, self.name, self.lease_s))
        if rld is not None:
            self.endpoint.send(rld.name, RelayOrder(rid, prompt, s, p.name, md.name if md else None, self.name,
                                                    self.handoff.mode, self.handoff.catch_up_threshold_tokens))
        if md is not None:
            self.endpoint.send(md.name, MainOrder(rid, prompt, s, p.name, rld.name if rld else None, self.name))
        return stream

    def _available(self, p: InstanceInfo) -> frozenset[Pipeline]:
        out = set()
        has_rld = bool(self.by_role("RLD", p.datacenter))
        if self.by_role("MD"):
            out.add(Pipeline.P_MD)
            if has_rld:
                out.add(Pipeline.P_RLD_MD)
        if has_rld:
            out.add(Pipeline.P_RLD)
        if self.by_role("D"):
            out.add(Pipeline.P_D)
        return frozenset(out)

    def _pick(self, candidates: list[InstanceInfo], prompt: Sequence[int] | None = None) -> InstanceInfo | None:
        """Longest predicted prefix hit first (when a prompt is given), then least loaded, then name."""
        if not candidates:
            return None

        def key(i: InstanceInfo) -> tuple:
            hit = self.indexes[i.name].match(prompt) if prompt is not None else 0
            return (-hit, self.load[i.name], i.name)

        return min(candidates, key=key)

    # ---- messages from instances ---------------------------------------------------------

    def _on_message(self, src: str, msg: Message) -> None:
        with self._lock:
            live = self.live.get(getattr(msg, "request_id", ""))
            if live is None:
                return
            live.last_event_at = time.monotonic()
            if isinstance(msg, Tokens):
                self._on_tokens(live, msg)
            elif isinstance(msg, PrefillDone):
                live.prefix_hit_tokens = msg.num_cached_tokens
                live.info["prefill_s"] = msg.prefill_s
                live.info["prefill_done_after_s"] = time.monotonic() - live.arrival  # queue + prefill
                self._unload(live, "P")
            elif isinstance(msg, RequestError):
                self._end(live, None, f"{msg.source}: {msg.error}", failed_at=msg.source)

    def _on_tokens(self, live: _Live, msg: Tokens) -> None:
        out = live.assembler.add(msg.start_index, msg.tokens, msg.finish_reason)
        live.info.update(msg.info)
        now = time.monotonic()
        start = live.assembler.next_index - len(out)
        for k, tok in enumerate(out):
            if live.first_token_at is None:
                live.first_token_at = now
            live.last_token_at = now
            live.stream._push(StreamEvent("token", start + k, tok))
        if live.assembler.done:
            self._end(live, live.assembler.finish_reason, None)

    def _end(self, live: _Live, finish_reason: str | None, error: str | None, failed_at: str | None = None) -> None:
        rid = live.stream.request_id
        self.live.pop(rid, None)
        if error is not None:  # the others drop what they hold for it
            for name in live.instances.values():
                if name != failed_at:
                    try:
                        self.endpoint.send(name, Cancel(rid, error))
                    except Exception:  # best effort: leases and deadlines clean up the rest
                        pass
        for role in ("P", "RLD", "MD"):
            self._unload(live, role)
        n_out = live.assembler.next_index
        ttft = live.first_token_at - live.arrival if live.first_token_at is not None else None
        tpot = ((live.last_token_at - live.first_token_at) / (n_out - 1)
                if n_out > 1 and live.first_token_at is not None else None)
        a = live.assembler
        extra = {**live.info, "instances": dict(live.instances), "est_hit_tokens": live.est_hit_tokens,
                 "duplicates": a.duplicates, "conflicts": a.conflicts}
        record = RequestRecord(rid, live.arrival_unix_s, live.prompt_len, n_out, live.prefix_hit_tokens or 0,
                               live.stream.pipeline.value, ttft, tpot, finish_reason or "error", error, extra)
        self.records.append(record)
        md = live.instances.get("MD")
        if md in self.indexes and error is None:
            self.indexes[md].insert(live.prompt + a.delivered)
        if self.request_log is not None:
            self.request_log.add(record)
        self.counters["completed" if error is None else "failed"] += 1
        if error is None:
            live.stream._push(StreamEvent("end", finish_reason=finish_reason, record=record))
        else:
            live.stream._push(StreamEvent("error", error=error, record=record))

    def _unload(self, live: _Live, role: str) -> None:
        name = live.instances.get(role)
        if name is not None and role not in live.unloaded:
            live.unloaded.add(role)
            self.load[name] -= 1

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            now = time.monotonic()
            with self._lock:
                for live in [lv for lv in self.live.values() if now - lv.last_event_at > self.request_timeout_s]:
                    self._end(live, None, f"no progress for {self.request_timeout_s:.0f} s")

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"instances": len(self.instances), "live": len(self.live), **self.counters,
                    "load": {k: v for k, v in self.load.items() if v}}

    def close(self) -> None:
        self._stop.set()
        if self.request_log is not None:
            self.request_log.close()
        self.endpoint.close()


def _sampling_dict(s: Any) -> dict[str, Any]:
    if isinstance(s, dict):
        d = {"temperature": 0.0, "seed": 0, "max_new_tokens": 16, "stop_at_eos": True, **s}
    else:
        d = {"temperature": s.temperature, "seed": s.seed, "max_new_tokens": s.max_new_tokens,
             "stop_at_eos": s.stop_at_eos}
    if int(d["max_new_tokens"]) < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {d['max_new_tokens']}")
    if float(d["temperature"]) < 0:
        raise ValueError(f"temperature must be >= 0, got {d['temperature']}")
    return d
