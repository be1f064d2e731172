"""The router: registered instances in, one pipeline per request, one clean stream out.

In: prompts (token ids) with sampling settings; instances that register and
unregister (`InstanceInfo`); `Tokens` / `PrefillDone` / `RequestError` / `Pong`
messages from the instances; a `ServingConfig`. Out: a `RequestStream` per request
(tokens in index order, each once, then the end or an error) and a `RequestRecord`
per request for the request log.

Per request: admission refuses at once (`executor.admission`: 503 when no instance
can serve, 429 when all that could are full); `executor.dispatch` picks the pipeline
and the instances among the routable ones (`executor.registry`); the orders
(`PrefillOrder`, `RelayOrder`, `MainOrder`) go out after the lock is released
(`executor.outbox`); what RLD and MD stream is fed to the client gap- and
duplicate-free (`executor.live`). On pipeline A the one order is a `PrefillOrder`
with no consumers to an A instance, which prefills, decodes and streams itself.
Heartbeats (`executor.health`) mark instances SUSPECT or DOWN; a request whose
instance goes DOWN, whose order cannot be delivered, or that makes no progress for
`stall_s` is retried, migrated, failed or left alone by one rule (`executor.faults`,
applied by `executor.router_faults`), each attempt under its own id (`rid`, `rid~1`,
...) so messages of an abandoned attempt are ignored; one with no progress for `request_timeout_s` ends with an error —
nothing hangs.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from executor.admission import Overloaded
from executor.config import ServingConfig
from executor.dispatch import assign
from executor.health import HealthMonitor, PeerState
from executor.live import LiveRequest
from executor.outbox import Outbox
from executor.registry import InstanceInfo, InstanceRegistry
from executor.request_log import BatchingRequestLog, RequestRecord
from executor.router_faults import ATTEMPT_ROLES, RouterFaults
from executor.routing import NoRouteError, Pipeline, agg_draw
from executor.stream import RequestStream, StreamEvent
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
    sampling_to_dict,
)
from placer import pdd


class Router(RouterFaults):
    """Routes requests over registered instances and assembles their streams."""

    _ids = itertools.count()

    def __init__(self, endpoint: Endpoint, config: ServingConfig | None = None, *, block_size: int = 16,
                 request_log: BatchingRequestLog | None = None, directory: Any = None,
                 health: HealthMonitor | None = None, num_blocks: int | None = None) -> None:
        """`block_size`, `num_blocks`: each instance's KV pool (a request that cannot fit is refused)."""
        self.endpoint, self.name = endpoint, endpoint.name
        self.block_size, self.num_blocks = block_size, num_blocks
        self.config = config or ServingConfig()
        self.request_log, self.directory = request_log, directory
        health = health or HealthMonitor(interval_s=self.config.heartbeat_s or 0.5)
        self.registry = InstanceRegistry(block_size, health)
        self.live: dict[str, LiveRequest] = {}
        self.attempts: dict[str, str] = {}  # attempt id → request id (only current attempts)
        self.records: deque[RequestRecord] = deque(maxlen=10_000)  # the latest, also sent to the request log
        self.counters: Counter[str] = Counter()
        #: called with each request's stream once it ended (its record set), under the router's lock:
        #: quick observers only (the server's latency histograms, `executor.latency_metrics`)
        self.on_end: list[Callable[[RequestStream], None]] = []
        self._lock = threading.RLock()
        self._outbox = Outbox(endpoint, self._send_failed)
        self._ping_seq = itertools.count()
        self._draws = itertools.count(1)  # the n-th attempt's draw for the aggregated split
        self._stop = threading.Event()
        endpoint.set_handler(self._on_message)
        self._watchdog = threading.Thread(target=self._watch, name="router-watchdog", daemon=True)
        self._watchdog.start()

    @property
    def instances(self) -> dict[str, InstanceInfo]:
        return self.registry.instances

    @property
    def joining(self) -> set[str]:
        return self.registry.joining

    @property
    def health(self) -> HealthMonitor:
        return self.registry.health

    # ---- registry ----------------------------------------------------------------------

    def register(self, info: InstanceInfo, *, joining: bool = False) -> None:
        """Add (or replace) an instance; it gets new requests from now on.

        `joining`: only once it answered a heartbeat (elastic adds). A new address under
        a known name is a restarted instance: it is tracked afresh (handshake = its first
        answer) and the requests the old one held are treated as lost with it.
        """
        with self._lock:
            moved = self.registry.add(info, joining=joining)
            if self.directory is not None:
                self.directory.add(PeerInfo(info.name, info.datacenter, info.address))
            self.counters["registered"] += 1
            if moved:
                self.counters["restarts_seen"] += 1
                self._fault_all(info.name, f"{info.name} restarted at {info.address}")
        self._outbox.flush()
        if joining:
            self.ping([info.name])  # the handshake: routable once it answers

    def unregister(self, name: str) -> None:
        """Stop sending new requests to `name` (requests it holds go on)."""
        with self._lock:
            self.registry.remove(name)
            self.counters["unregistered"] += 1

    def mark_down(self, name: str, reason: str = "reported dead") -> None:
        """An instance is known dead (its process exited): DOWN now, its requests handled."""
        with self._lock:
            if self.health.mark_down(name) is PeerState.DOWN:
                self.counters["peers_down"] += 1
                self._fault_all(name, f"{name} is down ({reason})")
        self._outbox.flush()

    def drain(self, name: str) -> None:
        """No new requests for `name`; what it holds goes on (see `holding`, `evacuate`)."""
        with self._lock:
            if name in self.instances:
                self.registry.draining.add(name)
                self.counters["drains"] += 1

    def holding(self, name: str) -> int:
        """Live requests whose current attempt uses `name`."""
        with self._lock:
            return sum(name in lv.instances.values() and (
                lv.instances.get(pdd.P) != name or pdd.P not in lv.unloaded) for lv in self.live.values())

    def evacuate(self, name: str) -> int:
        """Move every request `name` still holds to other instances (graceful: it is alive)."""
        with self._lock:
            lives = [lv for lv in self.live.values() if name in lv.instances.values()]
            for lv in lives:
                self._fault(lv, name, f"{name} is leaving", graceful=True)
        self._outbox.flush()
        return len(lives)

    # ---- submitting --------------------------------------------------------------------

    def submit(self, prompt: Sequence[int], sampling: Any, *, request_id: str | None = None,
               loop: asyncio.AbstractEventLoop | None = None) -> RequestStream:
        """Route one request; returns its stream at once (tokens follow).

        Raises `NoRouteError` (`NoCapacity`: nothing up can serve it), `Overloaded`, or (before any
        work) `TooLong` / `TooLarge` for a request beyond the context or an instance's KV pool.
        """
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError("prompt must not be empty")
        s = sampling_to_dict(sampling)
        self.config.admission.check_size(len(prompt), int(s["max_new_tokens"]), block_size=self.block_size,
                                         num_blocks=self.num_blocks)
        rid = request_id or f"req-{next(self._ids)}-{int(time.time() * 1000) % 100000}"
        with self._lock:
            try:
                self.config.admission.check_total(len(self.live))
                live = LiveRequest(RequestStream(rid, Pipeline.P_MD, loop), prompt, s)
                live.stream.pipeline = self._start_attempt(live, prompt, s, prefer_relay=False)
            except Overloaded:
                self.counters["rejected_overloaded"] += 1
                raise
            except NoRouteError:
                self.counters["rejected_no_capacity"] += 1
                raise
            self.live[rid] = live
        self._outbox.flush()
        live.info["orders_sent_after_s"] = round(time.monotonic() - live.arrival, 6)
        return live.stream

    def _start_attempt(self, live: LiveRequest, prompt: list[int], s: dict[str, Any], *,
                       prefer_relay: bool) -> Pipeline:
        """Pick instances and queue the orders of a new attempt; raises if nothing can serve it."""
        a = assign(self.registry, self.config.routing, self.config.admission, prompt, s["max_new_tokens"],
                   exclude=live.excluded, prefer_relay=prefer_relay, draw=agg_draw(next(self._draws)))
        if a.degraded:
            self.counters["fallbacks"] += 1
        if a.set_fallback:  # no P of the request's set queue was up (executor.set_queues)
            self.counters["set_fallbacks"] += 1
        self.attempts.pop(live.attempt_id, None)
        aid = live.begin_attempt(a)
        self.attempts[aid] = live.request_id
        for inst in (a.p, a.rld, a.md):
            if inst is not None:
                self.registry.load[inst.name] += 1
        self.registry.indexes[a.p.name].insert(prompt)
        if a.md is not None:
            self.registry.indexes[a.md.name].insert(prompt)
        self.counters[f"pipeline_{a.pipeline.value}"] += 1
        rld, md = (a.rld.name if a.rld else None), (a.md.name if a.md else None)
        consumers = [n for n in (rld, md) if n is not None]
        self._outbox.put(a.p.name, PrefillOrder(aid, prompt, s, consumers, self.name, self.config.lease_s), aid)
        if rld is not None:
            handoff = self.config.handoff
            self._outbox.put(rld, RelayOrder(aid, prompt, s, a.p.name, md, self.name, handoff.mode,
                                             handoff.catch_up_threshold_tokens, handoff.catch_up.final_batch_tokens,
                                             handoff.catch_up.max_rounds), aid)
        if md is not None:
            self._outbox.put(md, MainOrder(aid, prompt, s, a.p.name, rld, self.name), aid)
        return a.pipeline

    # ---- messages from instances ---------------------------------------------------------

    def _on_message(self, src: str, msg: Message) -> None:
        if isinstance(msg, Pong):
            self._on_pong(msg)
            return
        with self._lock:
            live = self.live.get(self.attempts.get(getattr(msg, "request_id", ""), ""))
            if live is None or live.attempt_id != msg.request_id:  # type: ignore[attr-defined]
                return
            live.last_event_at = time.monotonic()
            if isinstance(msg, Tokens):
                live.streamers.add(msg.source)
                if live.deliver(msg.start_index, msg.tokens, msg.finish_reason, msg.info):
                    self._end(live, live.assembler.finish_reason, None)
            elif isinstance(msg, PrefillDone):
                if live.attempt == 0:
                    live.prefix_hit_tokens = msg.num_cached_tokens
                    live.info["prefill_s"] = msg.prefill_s
                    live.info["prefill_done_after_s"] = time.monotonic() - live.arrival  # queue + prefill
                    live.info["p_queue_s"] = msg.queue_s
                self._unload(live, pdd.P)
            elif isinstance(msg, RequestError):
                self._end(live, None, f"{msg.source}: {msg.error}", failed_at=msg.source)
        self._outbox.flush()

    def _on_pong(self, msg: Pong) -> None:
        with self._lock:
            was = self.health.state(msg.source)
            change = self.health.answered(msg.source, msg.load)
            if msg.source in self.joining and msg.source in self.instances:
                self.joining.discard(msg.source)
                self.counters["joined"] += 1
            if change is PeerState.UP and was is PeerState.DOWN:
                self.counters["peers_recovered"] += 1

    def cancel(self, request_id: str, reason: str = "client disconnected") -> bool:
        """The client went away: end the request now and tell its instances to drop it (they free its
        KV blocks); False if it had already ended."""
        with self._lock:
            live = self.live.get(request_id)
            if live is not None:
                self._end(live, None, reason, counter="cancelled")
        self._outbox.flush()
        return live is not None

    def _end(self, live: LiveRequest, finish_reason: str | None, error: str | None, failed_at: str | None = None,
             cancel: tuple[str, dict[str, str]] | None = None, counter: str | None = None) -> None:
        """The request is over: free its instances, record it, close the client's stream."""
        self.live.pop(live.request_id, None)
        self.attempts.pop(live.attempt_id, None)
        if error is not None:  # the others drop what they hold for it
            aid, insts = cancel or (live.attempt_id, live.instances)
            for name in set(insts.values()):
                if name != failed_at:
                    self._outbox.put(name, Cancel(aid, error), None)
        for role in ATTEMPT_ROLES:
            self._unload(live, role)
        record = live.record(finish_reason, error)
        self.records.append(record)
        md = live.instances.get(pdd.MD) or live.instances.get(pdd.AGG)  # who keeps prompt + output cached
        if md in self.registry.indexes and error is None and live.attempt == 0:
            self.registry.indexes[md].insert(live.prompt + live.assembler.delivered)
        if self.request_log is not None:
            self.request_log.add(record)
        self.counters[counter or ("completed" if error is None else "failed")] += 1
        if error is None:
            live.stream.push(StreamEvent("end", finish_reason=finish_reason, record=record))
        else:
            live.stream.push(StreamEvent("error", error=error, record=record))
        for observe in self.on_end:
            try:
                observe(live.stream)
            except Exception:  # noqa: BLE001 - an observer's bug must not fail the request that ended
                self.counters["observer_errors"] += 1

    def _unload(self, live: LiveRequest, role: str) -> None:
        name = live.instances.get(role)
        if name is not None and role not in live.unloaded:
            live.unloaded.add(role)
            self.registry.load[name] -= 1

    # ---- heartbeats and deadlines ----------------------------------------------------------

    def ping(self, names: list[str]) -> None:
        """Send a heartbeat to each of `names` (its answer is a `Pong`; no answer counts as missed)."""
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
        self._outbox.flush()

    def _watch(self) -> None:
        tick = min(0.25, self.health.interval_s / 2)
        next_ping = time.monotonic()
        while not self._stop.wait(tick):
            now = time.monotonic()
            if self.config.heartbeat_s is not None and now >= next_ping:
                next_ping = now + self.health.interval_s
                with self._lock:
                    names = list(self.instances)
                self.ping(names)
            with self._lock:
                self._check_deadlines(time.monotonic())
            self._outbox.flush()

    def _check_deadlines(self, now: float) -> None:
        """End requests idle past `request_timeout_s`; treat those idle past `stall_s` as a fault."""
        timeout_s, stall_s = self.config.request_timeout_s, self.config.stall_s
        for live in list(self.live.values()):
            idle = now - live.last_event_at
            if idle > timeout_s:
                self._end(live, None, f"no progress for {timeout_s:.0f} s")
            elif idle > stall_s and now - live.stalled_at > stall_s:
                live.stalled_at = now
                self.counters["stalls"] += 1
                streamers = (pdd.MD, pdd.RLD, pdd.AGG)
                suspect = next((live.instances[r] for r in streamers if r in live.instances), None)
                self._fault(live, suspect, f"no progress for {stall_s:g} s")

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"instances": len(self.instances), "live": len(self.live), **self.counters,
                    "load": {k: v for k, v in self.registry.load.items() if v}, "health": self.health.snapshot(),
                    "draining": sorted(self.registry.draining), "joining": sorted(self.joining)}

    def close(self) -> None:
        self._stop.set()
        if self.request_log is not None:
            self.request_log.close()
        self.endpoint.close()
