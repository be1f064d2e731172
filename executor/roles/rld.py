"""RelayDecode (RLD): decode eagerly next to P while the KV crawls to MD, then hand over token ids.

Lifecycle of one request on RLD

    WAIT_KV ──KVData──▶ DECODING ──MainReady──▶ (one-shot) ─────────────▶ HANDED_OFF
       │                   │   └──────────────▶ CATCHING_UP ──last ack──▶ HANDED_OFF
       │                   └──stop (EOS / budget; always for filtered)──▶ FINISHED
       └──MainReady first (MD was faster)──▶ HANDED_OFF (empty final batch)

- WAIT_KV: a `RelayOrder` arrived; RLD pulled the prompt KV from P (from the first
  position its own radix cache lacks) over the in-datacenter channel. The KV is imported
  when RLD admits the request (:class:`placer.kv_admission.KvGate`: its prompt + output
  budget, in whole blocks, fits beside the reservations held); until then it waits, FIFO,
  staged on P.
- DECODING: imported (RLD owns its copy of the KV; P is told `KVDone`); streams t0
  and then one token per batched decode step to the router at once — the *eager
  output tokens*. Filtered requests (no `main`) stay here until they stop.
- On `MainReady` (MD holds the prompt KV) RLD chooses the handoff mode by the
  tokens MD lacks (`executor.handoff`): **one-shot** — stop and send them all in one
  final `HandoffTokens`; **catch-up** — send them, keep decoding and streaming, and
  on each `HandoffAck` send what was produced meanwhile, until the final batch.
- HANDED_OFF: RLD stopped decoding the request and released it (`engine.finish`:
  its whole blocks stay in RLD's radix cache); MD owns the stream from the index
  after the last one RLD streamed (carried as `streamed_upto`).
- FINISHED: the request stopped on RLD (EOS or budget) before any handoff: the
  final `Tokens` go to the router, and MD (if any) gets `RelayFinished`.

Queues: `relays` (every live request by id), `decoding` (the ones in the next batch).
Each output index is streamed by exactly one instance: RLD streams indices
`0..streamed_upto`, MD the rest.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from executor.engine.kv_payload import KVPayload
from executor.handoff import HandoffPolicy, HandoffSession
from executor.roles.common import KvGated, RoleWorker, kv_phases, sampling_from, stop_reason
from executor.transport.messages import (
    HandoffAck,
    HandoffTokens,
    KVData,
    KVDone,
    KVPull,
    MainReady,
    RelayFinished,
    RelayOrder,
    Tokens,
)
from placer import pdd
from placer.kv_admission import KvGate
class RelayState(enum.Enum):
    WAIT_KV = "wait_kv"
    DECODING = "decoding"
    CATCHING_UP = "catching_up"
    HANDED_OFF = "handed_off"
    FINISHED = "finished"


@dataclass
class _Relay:
    order: RelayOrder
    state: RelayState = RelayState.WAIT_KV
    request: Any = None
    streamed: int = 0  # next output index to stream
    main_ready: bool = False
    session: HandoffSession | None = None
    pull_start: int = 0
    created_at: float = field(default_factory=time.monotonic)
    pulled_at: float = 0.0  # when the (last) KVPull was sent
    phases: dict[str, float] = field(default_factory=dict)  # where t0's time went: sent with the first Tokens


class RelayWorker(KvGated, RoleWorker):
    ROLE = pdd.RLD

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.relays: dict[str, _Relay] = {}
        cfg = self.engine.config
        self.kv_gate = KvGate(cfg.num_blocks * cfg.block_size)  # KV reservations and the line waiting for room

    def handlers(self):
        return {RelayOrder: self.on_order, KVData: self.on_kv, MainReady: self.on_main_ready,
                HandoffAck: self.on_ack}

    def reply_to(self, request_id: str) -> str | None:
        r = self.relays.get(request_id)
        return r.order.reply_to if r else None

    # ---- messages ----------------------------------------------------------------------

    def on_order(self, src: str, order: RelayOrder) -> None:
        relay = _Relay(order, created_at=self.received_at or time.monotonic())
        self.relays[order.request_id] = relay
        self.counters["orders"] += 1
        self._pull(relay)

    def _pull(self, relay: _Relay) -> None:
        relay.pull_start = self.engine.cached_prefix_len(relay.order.prompt)
        relay.pulled_at = time.monotonic()
        relay.phases["rld_order_to_pull_s"] = round(relay.pulled_at - relay.created_at, 6)
        self.send(relay.order.prefill, KVPull(relay.order.request_id, relay.pull_start))

    def _import(self, src: str, kv: KVData, relay: _Relay) -> None:
        """Import ``kv`` (admitted: its reservation is held) and start decoding."""
        from executor.engine import PrefixMissingError

        o = relay.order
        t_import = time.perf_counter()
        try:
            req = self.engine.import_kv([*o.prompt, kv.first_token], KVPayload.from_bytes(kv.payload, copy=False),
                                        sampling_from(o.sampling), num_prompt_tokens=len(o.prompt))
        except PrefixMissingError:  # our cached prefix was evicted meanwhile: ask again
            self.counters["repulls"] += 1
            self._pull(relay)
            return
        relay.phases |= kv_phases("rld", kv, self.received_at, relay.pulled_at, time.perf_counter() - t_import)
        self.send(src, KVDone(kv.request_id, imported=True))
        self.counters["kv_received_bytes"] += len(kv.payload)
        relay.request, relay.state = req, RelayState.DECODING
        if self._advance(relay):
            return
        if relay.main_ready:
            self._begin_handoff(relay)

    def on_main_ready(self, src: str, ready: MainReady) -> None:
        relay = self.relays.get(ready.request_id)
        if relay is None:
            return
        relay.main_ready = True
        # WAIT_KV: MD got its KV before we got ours, so MD streams everything (empty final batch)
        if relay.state in (RelayState.WAIT_KV, RelayState.DECODING):
            self._begin_handoff(relay)

    def on_ack(self, src: str, ack: HandoffAck) -> None:
        relay = self.relays.get(ack.request_id)
        if relay is None or relay.state is not RelayState.CATCHING_UP or relay.session is None:
            return
        self._send_batch(relay, relay.session.on_ack(self._produced_upto(relay)))

    # ---- handoff -----------------------------------------------------------------------

    def _produced_upto(self, relay: _Relay) -> int:
        return relay.request.num_generated - 1 if relay.request is not None else -1

    def _begin_handoff(self, relay: _Relay) -> None:
        o = relay.order
        policy = HandoffPolicy(mode=o.handoff_mode, catch_up_threshold_tokens=o.catch_up_threshold_tokens,
                               catch_up=pdd.CatchUpRule(o.final_batch_tokens, o.max_rounds))
        produced = self._produced_upto(relay)
        relay.session = HandoffSession(policy, pending_tokens=max(0, produced))
        self.counters[f"handoffs_{relay.session.mode.value}"] += 1
        self._send_batch(relay, relay.session.start(produced))

    def _send_batch(self, relay: _Relay, batch) -> None:
        o = relay.order
        outputs = relay.request.output_ids if relay.request is not None else []
        tokens = outputs[batch.first_index : batch.last_index + 1]
        msg = HandoffTokens(o.request_id, batch.first_index, tokens, batch.final, relay.streamed - 1,
                            relay.session.mode.value, batch.round)
        self.counters["handoff_tokens"] += len(tokens)
        self.send(o.main, msg)
        if batch.final:
            relay.state = RelayState.HANDED_OFF
            self._forget(relay)
        else:
            relay.state = RelayState.CATCHING_UP

    # ---- decoding ----------------------------------------------------------------------

    def has_work(self) -> bool:
        return any(r.state in (RelayState.DECODING, RelayState.CATCHING_UP) for r in self.relays.values())

    def step(self) -> None:
        batch = [r for r in self.relays.values() if r.state in (RelayState.DECODING, RelayState.CATCHING_UP)]
        self.engine.decode_step([r.request for r in batch])
        self.counters["decode_steps"] += 1
        for relay in batch:
            self._advance(relay)

    def on_step_error(self, exc: Exception) -> None:
        for rid, r in list(self.relays.items()):
            if r.state in (RelayState.DECODING, RelayState.CATCHING_UP):
                self.fail(rid, f"RLD {self.name}: decode failed: {type(exc).__name__}: {exc}")

    def _stream(self, relay: _Relay, finish_reason: str | None = None) -> None:
        outputs = relay.request.output_ids
        new = outputs[relay.streamed :]
        if not new and finish_reason is None:
            return
        info = {"relay_tokens": len(outputs)} if finish_reason else {}
        if relay.phases:  # with the first batch (t0)
            info |= relay.phases | {"rld_t0_sent_unix_s": time.time()}
            relay.phases = {}
        self.send(relay.order.reply_to, Tokens(relay.order.request_id, relay.streamed, new, self.name,
                                               finish_reason, info))
        self.counters["tokens_streamed"] += len(new)
        relay.streamed = len(outputs)

    def _advance(self, relay: _Relay) -> bool:
        """Stream the new tokens; if the request reached EOS or its budget, finish it here."""
        reason = stop_reason(relay.request)
        self._stream(relay, finish_reason=reason)
        if reason is None:
            return False
        relay.state = RelayState.FINISHED
        if relay.order.main is not None:
            self.send(relay.order.main, RelayFinished(relay.order.request_id, reason))
        self.counters["finished_here"] += 1
        self._forget(relay)
        return True

    def _forget(self, relay: _Relay) -> None:
        if relay.request is not None:
            self.engine.finish(relay.request)
        self.relays.pop(relay.order.request_id, None)
        self._release_kv(relay.order.request_id)

    def _kv_waiter(self, request_id: str) -> _Relay | None:
        relay = self.relays.get(request_id)
        return relay if relay is not None and relay.state is RelayState.WAIT_KV else None

    def tick(self, now: float) -> None:
        late = [r for r, x in self.relays.items() if x.state is RelayState.WAIT_KV and now - x.created_at > self.kv_wait_s]
        for rid in late:
            self.fail(rid, f"{self.ROLE} {self.name}: the KV did not arrive within {self.kv_wait_s:g} s")

    def drop_request(self, request_id: str) -> None:
        relay = self.relays.get(request_id)
        if relay is not None:
            self._forget(relay)

    def stats_live(self) -> int:
        return len(self.relays)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "live": len(self.relays),
                "decoding": sum(r.state is not RelayState.WAIT_KV for r in self.relays.values())}
