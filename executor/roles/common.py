"""What the three roles share: an engine, an endpoint, an inbox, and one worker loop.

In: messages from the endpoint (pushed into `inbox` on the channel's thread).
Out: engine work done on the worker's own thread, messages sent to peers.

The worker loop (`run_once`): drain the inbox and dispatch each message to its
handler, expire leases (`tick`), then do one unit of engine work (`step`: a prefill
on P, one batched decode step on RLD/MD). All engine calls happen on this one
thread, so roles need no locks. `run_once` can also be driven by a test (no
thread) for deterministic interleavings. A handler that raises fails only its
request: the router gets a `RequestError`, the loop goes on.

Each message is stamped (`time.monotonic`) when the channel hands it over; a handler
reads that stamp as `received_at`, so roles can report where a request's time went
(the phase times the first `Tokens` message carries to the request log).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, ClassVar

from executor.engine.request import SamplingParams
from executor.transport.base import Endpoint, Transfer, TransportError
from executor.transport.messages import Cancel, KVDone, Message, Ping, Pong, RequestError, sampling_to_dict
from placer.kv_admission import footprint_tokens

log = logging.getLogger("executor.roles")

IDLE_WAIT_S = 0.02


def sampling_from(d: dict[str, Any]) -> SamplingParams:
    """An order's sampling settings (`messages.sampling_to_dict`) → the engine's `SamplingParams`."""
    d = sampling_to_dict(d)
    return SamplingParams(temperature=float(d["temperature"]), seed=int(d["seed"]),
                          max_new_tokens=int(d["max_new_tokens"]), stop_at_eos=bool(d["stop_at_eos"]))


def kv_phases(prefix: str, kv: Any, received_at: float, pulled_at: float, import_s: float) -> dict[str, float]:
    """Where a pulled KV's time went, as seen by the consumer that imported it (seconds; names
    start with `prefix`, the consumer's role): pull sent → KV received, P's wait and export,
    the transfer (P's send → here, on the wall clock: meaningful where clocks agree), the
    wait in this worker's inbox, the import."""
    now = time.monotonic()
    received_unix = time.time() - (now - received_at)
    handled_at = now - import_s
    phases = {"pull_to_kv_s": received_at - pulled_at, "p_pull_wait_s": kv.pull_wait_s,
              "p_export_s": kv.export_s, "kv_inbox_s": max(0.0, handled_at - received_at), "import_s": import_s}
    if kv.sent_at_unix_s:
        phases["kv_transfer_s"] = max(0.0, received_unix - kv.sent_at_unix_s)
    return {f"{prefix}_{k}": round(v, 6) for k, v in phases.items()}


def stop_reason(req: Any) -> str | None:
    """"length" (budget spent), "stop" (EOS), or None while the request goes on."""
    if not req.reached_stop():
        return None
    return "stop" if req.ended_at_eos() else "length"


class RoleWorker:
    """Base of P, RLD and MD: message dispatch and the worker thread."""

    ROLE: ClassVar[str] = "?"

    def __init__(self, name: str, engine: Any, endpoint: Endpoint, *, kv_deadline_s: float = 60.0,
                 message_deadline_s: float = 30.0, kv_wait_s: float = 180.0) -> None:
        self.name, self.engine, self.endpoint = name, engine, endpoint
        self.datacenter = endpoint.datacenter
        self.kv_deadline_s, self.message_deadline_s = kv_deadline_s, message_deadline_s
        self.kv_wait_s = kv_wait_s  # a decoder gives up on KV that has not come by then
        self.inbox: queue.Queue[tuple[str, Message, float]] = queue.Queue()
        self.received_at = 0.0  # monotonic time the message being handled reached this instance
        self.counters: Counter[str] = Counter()
        self.failed_transfers: deque[Transfer] = deque(maxlen=256)  # the latest, for inspection
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._handlers: dict[type, Callable[[str, Any], None]] = self.handlers()
        endpoint.set_handler(self._on_message)

    # ---- to override ------------------------------------------------------------------

    def handlers(self) -> dict[type, Callable[[str, Any], None]]:
        return {}

    def has_work(self) -> bool:
        return False

    def step(self) -> None:
        """One unit of engine work."""

    def tick(self, now: float) -> None:
        """Expire leases and deadlines."""

    def reply_to(self, request_id: str) -> str | None:
        return None

    def drop_request(self, request_id: str) -> None:
        """Forget a failed request, releasing what it holds."""

    def stats(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.ROLE, "datacenter": self.datacenter, **self.counters}

    # ---- the loop ---------------------------------------------------------------------

    def _on_message(self, src: str, msg: Message) -> None:
        if isinstance(msg, Ping):  # answered here, so a busy worker still reads as alive (overload ≠ down)
            try:
                self.endpoint.send(src, Pong(msg.seq, self.name, self.load()), deadline_s=self.message_deadline_s)
            except TransportError:
                pass
            return
        self.inbox.put((src, msg, time.monotonic()))

    def load(self) -> int:
        """Live requests plus queued messages (read from the channel's thread: approximate)."""
        return self.inbox.qsize() + int(self.stats_live())

    def stats_live(self) -> int:
        return 0

    def run_once(self, block: bool = False) -> bool:
        """Handle waiting messages, tick, do one step; returns whether anything happened."""
        did = False
        try:
            first = self.inbox.get(timeout=IDLE_WAIT_S) if block and not self.has_work() else self.inbox.get_nowait()
        except queue.Empty:
            first = None
        batch = [] if first is None else [first]
        while True:
            try:
                batch.append(self.inbox.get_nowait())
            except queue.Empty:
                break
        for src, msg, received_at in batch:
            did = True
            self.received_at = received_at
            self._dispatch(src, msg)
        self.tick(time.monotonic())
        if self.has_work():
            did = True
            try:
                self.step()
            except Exception as exc:  # a failed step must not stop the worker
                log.exception("%s: step failed", self.name)
                self.counters["step_errors"] += 1
                self.on_step_error(exc)
        return did

    def on_step_error(self, exc: Exception) -> None:
        """A batched step failed: subclasses fail the requests in that batch."""

    def _dispatch(self, src: str, msg: Message) -> None:
        if isinstance(msg, Cancel):
            self.counters["cancelled"] += 1
            self.drop_request(msg.request_id)
            return
        handler = self._handlers.get(type(msg))
        if handler is None:
            self.counters["unknown_messages"] += 1
            return
        try:
            handler(src, msg)
        except Exception as exc:
            log.exception("%s: %s from %s failed", self.name, msg.type_name, src)
            rid = getattr(msg, "request_id", None)
            if rid is not None:
                self.fail(rid, f"{self.ROLE} {self.name}: {type(exc).__name__}: {exc}")

    def fail(self, request_id: str, error: str) -> None:
        """Tell the router the request failed and drop it here."""
        self.counters["requests_failed"] += 1
        target = self.reply_to(request_id)
        self.drop_request(request_id)
        if target is not None:
            self.send(target, RequestError(request_id, self.name, error))

    def send(self, dst: str, msg: Message, deadline_s: float | None = None) -> Transfer | None:
        try:
            t = self.endpoint.send(dst, msg, deadline_s=deadline_s or self.message_deadline_s)
        except TransportError as exc:
            log.warning("%s: cannot send %s to %s: %s", self.name, msg.type_name, dst, exc)
            self.counters["send_errors"] += 1
            return None
        t.on_finish(self._watch_transfer)
        return t

    def _watch_transfer(self, t: Transfer) -> None:
        if t.error is not None:
            self.counters["transfers_failed"] += 1
            self.failed_transfers.append(t)
            if not self._stopping.is_set():  # at shutdown, unacknowledged transfers fail: expected
                log.warning("%s: %r failed: %s", self.name, t, t.error)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"{self.ROLE}-{self.name}", daemon=True)
        self._thread.start()

    def thread_cpu_s(self) -> float | None:
        """CPU seconds its worker thread has run (None before ``start``, after ``stop``, or where the
        platform has no per-thread clock): what the role costs on its own thread, engine included."""
        thread = self._thread
        if thread is None or thread.ident is None or not hasattr(time, "pthread_getcpuclockid"):
            return None
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # the thread has just ended
            return None

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.run_once(block=True)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.endpoint.close()


class KvGated:
    """Mixin of the decoders that admit imported KV by :class:`placer.kv_admission.KvGate` (MD, RLD): one
    admission and one release rule. The worker gives ``kv_gate``, :meth:`_kv_waiter` (the request's holder,
    with its ``order``, while it waits for KV room, else None), ``_import(src, kv, holder)``, ``engine``,
    ``counters`` and ``send``."""

    def _kv_waiter(self, request_id: str) -> Any:
        raise NotImplementedError

    def _kv_clock(self) -> int:
        """The gate's clock: the decode steps this worker has run (every request it decodes emits one
        token a step, so a request admitted at step a with budget n is gone by step a + n)."""
        return self.counters["decode_steps"]

    def on_kv(self, src: str, kv: Any) -> None:
        """A request's KV arrives from P: admit it by :mod:`placer.kv_admission` (the simulator's and the
        planner's rule: the request's whole final context must fit beside the reservations held, else
        its KV waits here, staged on P, FIFO with EASY backfilling: it may pass a head that does not
        fit when its budget ends by the step the head's room comes, or it fits beside the head then)
        and import it; a KV nobody waits for goes back unused."""
        holder = self._kv_waiter(kv.request_id)
        if holder is None:
            self.send(src, KVDone(kv.request_id, imported=False))
            return
        o = holder.order
        budget = sampling_from(o.sampling).max_new_tokens
        need = footprint_tokens(len(o.prompt), budget, self.engine.config.block_size)
        # its stay here is at most its output budget, in this decoder's lockstep steps (the gate's clock)
        if not self.kv_gate.offer(kv.request_id, need, (src, kv), steps=budget, now=self._kv_clock()):
            self.counters["kv_admission_waits"] += 1
            return
        self._import(src, kv, holder)

    def _release_kv(self, request_id: str) -> None:
        """``request_id`` leaves: free its KV reservation (or its place in the line) and import the
        KV of the requests that now fit; a KV whose request no longer waits goes back to P unused."""
        admitted, dropped = self.kv_gate.release(request_id, now=self._kv_clock())
        if dropped is not None:
            src, kv = dropped
            self.send(src, KVDone(kv.request_id, imported=False))
        for src, kv in admitted:
            holder = self._kv_waiter(kv.request_id)
            if holder is None:
                self.send(src, KVDone(kv.request_id, imported=False))
                self._release_kv(kv.request_id)
                continue
            self._import(src, kv, holder)
