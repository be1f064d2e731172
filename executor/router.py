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

Resilience. The router pings every instance (`executor.health`: UP → SUSPECT → DOWN
after missed heartbeats, back UP on any answer); DOWN, draining and joining
instances get no new requests. A request whose instance goes DOWN, whose order
cannot be delivered, or that makes no progress for `stall_s` is handled by one rule:
nothing reached the client yet → a new *attempt* from scratch that avoids the
suspect (RLD in P's datacenter instead of an unreachable MD: a *fallback*); tokens
already reached the client and the suspect is the MD → a *migration*: a new attempt
that prefills `prompt + delivered` and streams from the next index (P-RLD, or another
MD), so the client's stream has no gap and no duplicate at the seam; the suspect is
RLD → a clear error event (never a silent re-run); P → nothing (the decoders hold the
KV). Each attempt has its own request id (`rid`, `rid~1`, ...): messages of an
abandoned attempt are ignored, and its instances get `Cancel`. At most
`max_attempts` attempts. Admission (`executor.admission`) refuses at once: 503 when
no instance can serve, 429 when all that could are full. Orders are sent after the
router's lock is released (an outbox), so no channel delivery ever waits on it.
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

from executor.admission import AdmissionPolicy, NoCapacity, Overloaded
from executor.handoff import HandoffPolicy
from executor.health import HealthMonitor, PeerState
from executor.request_log import BatchingRequestLog, RequestRecord
from executor.routing import NoRouteError, Pipeline, PrefixIndex, RoutingPolicy
from executor.stream import StreamAssembler
from executor.transport.base import Endpoint, PeerInfo
from executor.transport.messages import (
    Cancel,
    MainOrder,
    Message,
    Ping,
    Pong,
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
    sampling: dict[str, Any] = field(default_factory=dict)
    attempt: int = 0
    attempt_id: str = ""
    offset: int = 0  # output index of the current attempt's first token
    streamers: set[str] = field(default_factory=set)  # instances that streamed in the current attempt
    excluded: set[str] = field(default_factory=set)
    migrations: int = 0
    retries: int = 0
    stalled_at: float = 0.0


class Router:
    """Routes requests over registered instances and assembles their streams."""

    _ids = itertools.count()

    def __init__(self, endpoint: Endpoint, policy: RoutingPolicy, handoff: HandoffPolicy | None = None, *,
                 block_size: int = 16, request_log: BatchingRequestLog | None = None,
                 request_timeout_s: float = 120.0, lease_s: float = 30.0, directory: Any = None,
                 health: HealthMonitor | None = None, heartbeat_s: float | None = 0.5, stall_s: float = 30.0,
                 max_attempts: int = 4, admission: AdmissionPolicy | None = None) -> None:
        self.endpoint, self.policy = endpoint, policy
        self.handoff = handoff or HandoffPolicy()
        self.name = endpoint.name
        self.block_size = block_size
        self.request_log = request_log
        self.request_timeout_s, self.lease_s = request_timeout_s, lease_s
        self.stall_s, self.max_attempts = stall_s, max_attempts
        self.directory = directory
        self.health = health or HealthMonitor(interval_s=heartbeat_s or 0.5)
        self.heartbeats = heartbeat_s is not None  # off: health still learns from failed sends and mark_down
        self.admission = admission or AdmissionPolicy()
        self.instances: dict[str, InstanceInfo] = {}
        self.draining: set[str] = set()
        self.joining: set[str] = set()
        self.load: Counter[str] = Counter()
        self.indexes: dict[str, PrefixIndex] = {}
        self.live: dict[str, _Live] = {}
        self.attempts: dict[str, str] = {}  # attempt id → request id (only current attempts)
        self.records: deque[RequestRecord] = deque(maxlen=10_000)  # the latest, also sent to the request log
        self.counters: Counter[str] = Counter()
        self._lock = threading.RLock()
        self._outbox: deque[tuple[str, Message, str | None]] = deque()
        self._olock = threading.Lock()
        self._ping_seq = itertools.count()
        self._stop = threading.Event()
        endpoint.set_handler(self._on_message)
        self._watchdog = threading.Thread(target=self._watch, name="router-watchdog", daemon=True)
        self._watchdog.start()

    # ---- registry ----------------------------------------------------------------------

    def register(self, info: InstanceInfo, *, joining: bool = False) -> None:
        """Add (or replace) an instance; it gets new requests from now on.

        `joining`: only once it answered a heartbeat (elastic adds). A new address under
        a known name is a restarted instance: it is tracked afresh (handshake = its first
        answer) and the requests the old one held are treated as lost with it.
        """
        with self._lock:
            old = self.instances.get(info.name)
            self.instances[info.name] = info
            moved = old is not None and old.address != info.address
            if old is None or moved:
                self.indexes[info.name] = PrefixIndex(self.block_size)
                self.health.add(info.name)
            if joining:
                self.joining.add(info.name)
            self.draining.discard(info.name)
            if self.directory is not None:
                self.directory.add(PeerInfo(info.name, info.datacenter, info.address))
            self.counters["registered"] += 1
            if moved:
                self.counters["restarts_seen"] += 1
                self._fault_all(info.name, f"{info.name} restarted at {info.address}")
        self._flush()
        if joining:
            self._ping([info.name])  # the handshake: routable once it answers

    def unregister(self, name: str) -> None:
        """Stop sending new requests to `name` (requests it holds go on)."""
        with self._lock:
            self.instances.pop(name, None)
            self.indexes.pop(name, None)
            self.health.remove(name)
            self.draining.discard(name)
            self.joining.discard(name)
            self.counters["unregistered"] += 1

    def routable(self, name: str) -> bool:
        return (name in self.instances and name not in self.draining and name not in self.joining
                and self.health.state(name) is not PeerState.DOWN)

    def by_role(self, role: str, datacenter: str | None = None) -> list[InstanceInfo]:
        """Instances of `role` that may get new requests (not DOWN, draining or joining)."""
        with self._lock:
            return [i for i in self.instances.values()
                    if i.role == role and (datacenter is None or i.datacenter == datacenter) and self.routable(i.name)]

    def mark_down(self, name: str, reason: str = "reported dead") -> None:
        """An instance is known dead (its process exited): DOWN now, its requests handled."""
        with self._lock:
            if self.health.mark_down(name) is PeerState.DOWN:
                self.counters["peers_down"] += 1
                self._fault_all(name, f"{name} is down ({reason})")
        self._flush()

    def drain(self, name: str) -> None:
        """No new requests for `name`; what it holds goes on (see `holding`, `evacuate`)."""
        with self._lock:
            if name in self.instances:
                self.draining.add(name)
                self.counters["drains"] += 1

    def holding(self, name: str) -> int:
        """Live requests whose current attempt uses `name`."""
        with self._lock:
            return sum(name in lv.instances.values() and (
                lv.instances.get("P") != name or "P" not in lv.unloaded) for lv in self.live.values())

    def evacuate(self, name: str) -> int:
        """Move every request `name` still holds to other instances (graceful: it is alive)."""
        with self._lock:
            lives = [lv for lv in self.live.values() if name in lv.instances.values()]
            for lv in lives:
                self._fault(lv, name, f"{name} is leaving", graceful=True)
        self._flush()
        return len(lives)

    # ---- submitting --------------------------------------------------------------------

    def submit(self, prompt: Sequence[int], sampling: Any, *, request_id: str | None = None,
               loop: asyncio.AbstractEventLoop | None = None) -> RequestStream:
        """Route one request; returns its stream at once (tokens follow).

        Raises `NoRouteError` (`NoCapacity`: nothing up can serve it) or `Overloaded`.
        """
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("prompt must not be empty")
        s = _sampling_dict(sampling)
        rid = request_id or f"req-{next(self._ids)}-{int(time.time() * 1000) % 100000}"
        with self._lock:
            try:
                self.admission.check_total(len(self.live))
            except Overloaded:
                self.counters["rejected_overloaded"] += 1
                raise
            stream = RequestStream(rid, Pipeline.P_MD, loop)
            now = time.monotonic()
            live = _Live(stream, len(prompt), s["max_new_tokens"], time.time(), now, {}, 0, last_event_at=now,
                         prompt=prompt, sampling=s)
            try:
                stream.pipeline = self._start_attempt(live, prompt, s, prefer_relay=False)
            except Overloaded:
                self.counters["rejected_overloaded"] += 1
                raise
            except NoRouteError:
                self.counters["rejected_no_capacity"] += 1
                raise
            self.live[rid] = live
        self._flush()
        return stream

    def _start_attempt(self, live: _Live, prompt: list[int], s: dict[str, Any], *, prefer_relay: bool) -> Pipeline:
        """Pick instances and queue the orders of a new attempt; raises if nothing can serve it."""
        ex = live.excluded
        p = self._pick([i for i in self.by_role("P") if i.name not in ex], prompt, role="P")
        est_hit = self.indexes[p.name].match(prompt)
        avail = self._available(p, ex)
        if not avail:
            raise NoCapacity(f"no decoder is up to serve a request with prefill on {p.name}")
        if prefer_relay and Pipeline.P_RLD in avail:
            pipeline = Pipeline.P_RLD
        elif prefer_relay:
            pipeline = next(x for x in (Pipeline.P_MD, Pipeline.P_D, Pipeline.P_RLD_MD) if x in avail)
        else:
            try:
                pipeline = self.policy.choose(len(prompt), est_hit, s["max_new_tokens"], avail)
            except NoRouteError:  # the plan's pipelines lack a live instance: degrade, don't refuse
                pipeline = next(x for x in (Pipeline.P_RLD, Pipeline.P_MD, Pipeline.P_RLD_MD, Pipeline.P_D)
                                if x in avail)
                self.counters["fallbacks"] += 1
        rld = (self._pick([i for i in self.by_role("RLD", p.datacenter) if i.name not in ex], role="RLD")
               if pipeline.uses_relay else None)
        decoders = self.by_role("D") if pipeline is Pipeline.P_D else self.by_role("MD")
        md = self._pick([i for i in decoders if i.name not in ex], prompt, role="MD") if pipeline.uses_main else None
        if live.attempt_id:
            self.attempts.pop(live.attempt_id, None)
            live.attempt += 1
        aid = live.stream.request_id if live.attempt == 0 else f"{live.stream.request_id}~{live.attempt}"
        live.attempt_id = aid
        self.attempts[aid] = live.stream.request_id
        live.instances = {"P": p.name, **({"RLD": rld.name} if rld else {}), **({"MD": md.name} if md else {})}
        live.unloaded, live.streamers = set(), set()
        live.est_hit_tokens = est_hit if live.attempt == 0 else live.est_hit_tokens
        live.last_event_at = time.monotonic()
        for inst in (p, rld, md):
            if inst is not None:
                self.load[inst.name] += 1
        self.indexes[p.name].insert(prompt)
        if md is not None:
            self.indexes[md.name].insert(prompt)
        self.counters[f"pipeline_{pipeline.value}"] += 1
        consumers = [i.name for i in (rld, md) if i is not None]
        self._queue(p.name, PrefillOrder(aid, prompt, s, consumers, self.name, self.lease_s), aid)
        if rld is not None:
            self._queue(rld.name, RelayOrder(aid, prompt, s, p.name, md.name if md else None, self.name,
                                             self.handoff.mode, self.handoff.catch_up_threshold_tokens), aid)
        if md is not None:
            self._queue(md.name, MainOrder(aid, prompt, s, p.name, rld.name if rld else None, self.name), aid)
        return pipeline

    def _available(self, p: InstanceInfo, exclude: set[str] = frozenset()) -> frozenset[Pipeline]:  # type: ignore[assignment]
        out = set()
        has_rld = any(i.name not in exclude for i in self.by_role("RLD", p.datacenter))
        if any(i.name not in exclude for i in self.by_role("MD")):
            out.add(Pipeline.P_MD)
            if has_rld:
                out.add(Pipeline.P_RLD_MD)
        if has_rld:
            out.add(Pipeline.P_RLD)
        if any(i.name not in exclude for i in self.by_role("D")):
            out.add(Pipeline.P_D)
        return frozenset(out)

    def _pick(self, candidates: list[InstanceInfo], prompt: Sequence[int] | None = None, *,
              role: str = "") -> InstanceInfo:
        """Longest predicted prefix hit first (when a prompt is given), then least loaded, then name;
        SUSPECT instances last, full ones never (`Overloaded` if all are full)."""
        if not candidates:
            label = {"P": "prefill (P)", "RLD": "relay decode (RLD)", "MD": "main decode (MD)"}.get(role, "matching")
            raise NoCapacity(f"no {label} instance is up")
        room = [i for i in candidates if not self.admission.full(self.load[i.name])]
        if not room:
            raise Overloaded(f"every {role} instance is at its limit of {self.admission.max_per_instance} requests",
                             self.admission.retry_after_s)

        def key(i: InstanceInfo) -> tuple:
            hit = self.indexes[i.name].match(prompt) if prompt is not None else 0
            return (self.health.state(i.name) is PeerState.SUSPECT, -hit, self.load[i.name], i.name)

        return min(room, key=key)

    # ---- sending (never under the lock) ---------------------------------------------------

    def _queue(self, dst: str, msg: Message, attempt_id: str | None) -> None:
        with self._olock:
            self._outbox.append((dst, msg, attempt_id))

    def _flush(self) -> None:
        """Send what was queued under the lock; a failed order is a fault of its attempt."""
        while True:
            with self._olock:
                if not self._outbox:
                    return
                dst, msg, aid = self._outbox.popleft()
            try:
                t = self.endpoint.send(dst, msg)
            except Exception as exc:  # noqa: BLE001 - closed endpoint, unknown peer, broken socket: a fault
                if aid is not None:
                    self._send_failed(aid, dst, str(exc))
                continue
            if aid is not None:
                t.on_finish(lambda t, aid=aid, dst=dst: self._send_failed(aid, dst, t.error) if t.error else None)

    def _send_failed(self, aid: str, dst: str, error: str) -> None:
        with self._lock:
            self.counters["orders_undelivered"] += 1
            if self.health.send_failed(dst) is PeerState.DOWN:
                self.counters["peers_down"] += 1
                self._fault_all(dst, f"{dst} is down")
            live = self.live.get(self.attempts.get(aid, ""))
            if live is not None and live.attempt_id == aid:
                self._fault(live, dst, f"could not reach {dst}: {error}")
        self._flush()

    def _ping(self, names: list[str]) -> None:
        for name in names:
            with self._lock:
                if name not in self.instances:
                    continue
                change = self.health.sent(name)
                if change is not None:
                    self._on_health_change(name, change)
            try:
                self.endpoint.send(name, Ping(next(self._ping_seq), time.time()), deadline_s=self.health.interval_s * 4)
            except Exception:  # noqa: BLE001, S110 - an unanswered ping is the signal; health counted it
                pass
        self._flush()

    # ---- faults ----------------------------------------------------------------------------

    def _on_health_change(self, name: str, state: PeerState) -> None:
        self.counters[f"peers_{state.value}"] += 1
        if state is PeerState.DOWN:
            self._fault_all(name, f"{name} is down (missed {self.health.down_after} heartbeats)")

    def _fault_all(self, name: str, cause: str) -> None:
        for lv in [lv for lv in self.live.values() if name in lv.instances.values()]:
            self._fault(lv, name, cause)

    def _fault(self, live: _Live, suspect: str | None, cause: str, *, graceful: bool = False) -> None:
        """One attempt failed (see the module doc for the rule). Called under the lock."""
        if live.stream.request_id not in self.live:
            return
        role = next((r for r, n in live.instances.items() if n == suspect), None)
        delivered = live.assembler.next_index
        if role == "P" and delivered > 0 and not graceful:
            return  # the decoders already hold the KV
        if role == "RLD" and not graceful and live.instances.get("MD") in live.streamers:
            return  # MD streams: the handoff is done, RLD holds nothing of it any more
        if delivered > 0 and role == "RLD" and not graceful and not (live.streamers - {suspect}):
            self.counters["failures_after_first_token"] += 1
            self._end(live, None, f"{cause}: RLD {suspect} failed after {delivered} tokens reached the client; "
                                  "not retried", failed_at=suspect)
            return
        if delivered > 0 and role is None and suspect is not None:
            return  # not part of the current attempt
        if live.attempt + 1 >= self.max_attempts:
            self._end(live, None, f"{cause}; gave up after {live.attempt + 1} attempts", failed_at=suspect)
            return
        old_aid, old = live.attempt_id, dict(live.instances)
        for r in ("P", "RLD", "MD"):
            self._unload(live, r)
        if suspect is not None:
            live.excluded.add(suspect)
        was_main = "MD" in old
        try:
            if delivered == 0:
                live.assembler.rewind()
                pipeline = self._start_attempt(live, live.prompt, live.sampling, prefer_relay=role == "MD")
                live.retries += 1
                self.counters["retries"] += 1
            else:
                k = live.assembler.rewind()
                s = {**live.sampling, "max_new_tokens": live.max_tokens - k}
                live.offset = k
                pipeline = self._start_attempt(live, live.prompt + live.assembler.delivered[:k], s,
                                               prefer_relay=True)
                live.migrations += 1
                self.counters["migrations"] += 1
        except (NoRouteError, Overloaded) as exc:
            self._end(live, None, f"{cause}; no instance left to take it over: {exc}", failed_at=suspect,
                      cancel=(old_aid, old))
            return
        if was_main and pipeline is Pipeline.P_RLD:
            self.counters["fallbacks"] += 1
        live.info.setdefault("attempts", []).append({"cause": cause, "instances": old})
        for name in set(old.values()) - {suspect}:
            self._queue(name, Cancel(old_aid, cause), None)

    # ---- messages from instances ---------------------------------------------------------

    def _on_message(self, src: str, msg: Message) -> None:
        if isinstance(msg, Pong):
            with self._lock:
                was = self.health.state(msg.source)
                change = self.health.answered(msg.source, msg.load)
                if msg.source in self.joining and msg.source in self.instances:
                    self.joining.discard(msg.source)
                    self.counters["joined"] += 1
                if change is PeerState.UP and was is PeerState.DOWN:
                    self.counters["peers_recovered"] += 1
            return
        with self._lock:
            live = self.live.get(self.attempts.get(getattr(msg, "request_id", ""), ""))
            if live is None or live.attempt_id != msg.request_id:  # type: ignore[attr-defined]
                return
            live.last_event_at = time.monotonic()
            if isinstance(msg, Tokens):
                live.streamers.add(msg.source)
                self._on_tokens(live, msg)
            elif isinstance(msg, PrefillDone):
                if live.attempt == 0:
                    live.prefix_hit_tokens = msg.num_cached_tokens
                    live.info["prefill_s"] = msg.prefill_s
                    live.info["prefill_done_after_s"] = time.monotonic() - live.arrival  # queue + prefill
                self._unload(live, "P")
            elif isinstance(msg, RequestError):
                self._end(live, None, f"{msg.source}: {msg.error}", failed_at=msg.source)
        self._flush()

    def _on_tokens(self, live: _Live, msg: Tokens) -> None:
        out = live.assembler.add(live.offset + msg.start_index, msg.tokens, msg.finish_reason)
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

    def _end(self, live: _Live, finish_reason: str | None, error: str | None, failed_at: str | None = None,
             cancel: tuple[str, dict[str, str]] | None = None) -> None:
        rid = live.stream.request_id
        self.live.pop(rid, None)
        self.attempts.pop(live.attempt_id, None)
        if error is not None:  # the others drop what they hold for it
            aid, insts = cancel or (live.attempt_id, live.instances)
            for name in set(insts.values()):
                if name != failed_at:
                    self._queue(name, Cancel(aid, error), None)
        for role in ("P", "RLD", "MD"):
            self._unload(live, role)
        n_out = live.assembler.next_index
        ttft = live.first_token_at - live.arrival if live.first_token_at is not None else None
        tpot = ((live.last_token_at - live.first_token_at) / (n_out - 1)
                if n_out > 1 and live.first_token_at is not None else None)
        a = live.assembler
        extra = {**live.info, "instances": dict(live.instances), "est_hit_tokens": live.est_hit_tokens,
                 "duplicates": a.duplicates, "conflicts": a.conflicts, "migrations": live.migrations,
                 "retries": live.retries}
        record = RequestRecord(rid, live.arrival_unix_s, live.prompt_len, n_out, live.prefix_hit_tokens or 0,
                               live.stream.pipeline.value, ttft, tpot, finish_reason or "error", error, extra)
        self.records.append(record)
        md = live.instances.get("MD")
        if md in self.indexes and error is None and live.attempt == 0:
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
        tick = min(0.25, self.health.interval_s / 2)
        next_ping = time.monotonic()
        while not self._stop.wait(tick):
            now = time.monotonic()
            if self.heartbeats and now >= next_ping:
                next_ping = now + self.health.interval_s
                with self._lock:
                    names = list(self.instances)
                self._ping(names)
            now = time.monotonic()
            with self._lock:
                for live in list(self.live.values()):
                    idle = now - live.last_event_at
                    if idle > self.request_timeout_s:
                        self._end(live, None, f"no progress for {self.request_timeout_s:.0f} s")
                    elif idle > self.stall_s and now - live.stalled_at > self.stall_s:
                        live.stalled_at = now
                        self.counters["stalls"] += 1
                        suspect = live.instances.get("MD") or live.instances.get("RLD")
                        self._fault(live, suspect, f"no progress for {self.stall_s:g} s")
            self._flush()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"instances": len(self.instances), "live": len(self.live), **self.counters,
                    "load": {k: v for k, v in self.load.items() if v}, "health": self.health.snapshot(),
                    "draining": sorted(self.draining), "joining": sorted(self.joining)}

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
