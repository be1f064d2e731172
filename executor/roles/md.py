"""MainDecode (MD): pull only the KV its own cache lacks, catch up from token ids, decode the rest.

Lifecycle of one request on MD

    WAIT_KV ──KVData──▶ DECODING                                   (P-MD, P-D)
    WAIT_KV ──KVData──▶ WAIT_HANDOFF ──final batch──▶ DECODING      (P-RLD-MD, one-shot)
                             └──batch──▶ CATCHING_UP ──final batch──▶ DECODING   (catch-up)
    any state before DECODING ──RelayFinished──▶ released (the KV stays cached)
    DECODING ──EOS / budget──▶ released

- WAIT_KV: on `MainOrder` MD matches the prompt against its own radix cache (DRC:
  it keeps the history KV of earlier turns, prompts *and* outputs) and sends
  `KVPull(start)` to P for the rest only — over the WAN, the one transfer PDD pays.
  If an earlier request whose KV is still on its way holds more of this prompt (the
  previous turn of the conversation), the pull waits for that import (`deferred`)
  and then asks only for the rest, so MD's hit stays aligned with P's.
- On `KVData` MD admits the request when its prompt + output budget, in whole blocks,
  fits beside the reservations held (:class:`placer.kv_admission.KvGate`, the simulator's
  and the planner's rule; else the KV waits, FIFO, staged on P, until a request leaves),
  then imports the payload (now MD owns its copy; P gets `KVDone`). If
  its cached prefix was evicted meanwhile, it pulls again from what it still has.
  P-MD: MD owns the stream from index 0 (t0) and decodes. P-RLD-MD: MD sends
  `MainReady` to RLD and waits.
- `HandoffTokens` (token ids of indices `first_index..`): MD drops its own
  not-yet-computed guesses from `first_index` on (pending tokens hold no KV) and
  runs ONE extend-decode over t0 (or its last pending token) and the given ids —
  the same KV and next token that many decode steps would give. Non-final: MD
  acknowledges (`HandoffAck`) and waits for more. Final: MD owns the stream from
  `streamed_upto + 1` (usually its freshly predicted token) and decodes on.
- `RelayFinished` (the request ended on RLD): MD releases the request; if the KV
  had not arrived it still imports it when it does, so MD's cache keeps up with P's.

Released requests go through `engine.finish`: whole blocks (prompt and outputs)
stay in the radix cache, which is what makes the next turn's pull small.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from executor.engine.kv_payload import KVPayload
from executor.roles.common import KvGated, RoleWorker, kv_phases, sampling_from, stop_reason
from executor.transport.messages import (
    HandoffAck,
    HandoffTokens,
    KVData,
    KVDone,
    KVPull,
    MainOrder,
    MainReady,
    RelayFinished,
    Tokens,
    encode,
)
from placer import pdd
from placer.kv_admission import KvGate
class MainState(enum.Enum):
    WAIT_KV = "wait_kv"
    WAIT_HANDOFF = "wait_handoff"
    CATCHING_UP = "catching_up"
    DECODING = "decoding"


@dataclass
class _Main:
    order: MainOrder
    state: MainState = MainState.WAIT_KV
    request: Any = None
    streamed: int = 0  # next output index to stream, once MD owns the stream
    relay_finished: bool = False
    pulled: bool = False  # KVPull sent (False while deferred behind an in-flight prefix)
    pull_start: int = 0
    created_at: float = field(default_factory=time.monotonic)
    info: dict[str, Any] = field(default_factory=dict)
    pulled_at: float = 0.0  # when the (last) KVPull was sent
    phases: dict[str, float] = field(default_factory=dict)  # where t0's time went: sent with the first Tokens


class MainWorker(KvGated, RoleWorker):
    ROLE = pdd.MD

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.mains: dict[str, _Main] = {}
        self.deferred: dict[str, list[str]] = {}  # in-flight request → requests waiting for its KV
        cfg = self.engine.config
        self.kv_gate = KvGate(cfg.num_blocks * cfg.block_size)  # KV reservations and the line waiting for room
        self.kv_bytes_per_token = self.engine.model_config.kv_bytes_per_token

    def handlers(self):
        return {MainOrder: self.on_order, KVData: self.on_kv, HandoffTokens: self.on_handoff,
                RelayFinished: self.on_relay_finished}

    def reply_to(self, request_id: str) -> str | None:
        m = self.mains.get(request_id)
        return m.order.reply_to if m else None

    # ---- messages ----------------------------------------------------------------------

    def on_order(self, src: str, order: MainOrder) -> None:
        main = _Main(order, created_at=self.received_at or time.monotonic())
        self.mains[order.request_id] = main
        self.counters["orders"] += 1
        blocker = self._inflight_prefix(order.prompt)
        if blocker is not None:
            self.deferred.setdefault(blocker, []).append(order.request_id)
            self.counters["pulls_deferred"] += 1
            return
        self._pull(main)

    def _inflight_prefix(self, prompt: list[int]) -> str | None:
        """An earlier request whose KV is on its way and covers more of `prompt` than the cache does.

        Its import will put that prefix in the radix cache, so waiting for it and then
        pulling only the rest beats pulling the whole prompt again over the WAN (this keeps
        MD's hit aligned with P's when turns of one conversation come quickly).
        """
        cached = self.engine.cached_prefix_len(prompt)
        block = self.engine.config.block_size
        best, best_len = None, cached + block
        for rid, m in self.mains.items():
            if m.state is not MainState.WAIT_KV or not m.pulled:
                continue
            other = m.order.prompt
            n = min(len(other), len(prompt))
            k = next((i for i in range(n) if other[i] != prompt[i]), n)
            k -= k % block
            if k >= best_len:
                best, best_len = rid, k
        return best

    def _pull(self, main: _Main) -> None:
        main.pull_start = self.engine.cached_prefix_len(main.order.prompt)
        main.pulled = True
        main.pulled_at = time.monotonic()
        main.phases["md_order_to_pull_s"] = round(main.pulled_at - main.created_at, 6)
        self.send(main.order.prefill, KVPull(main.order.request_id, main.pull_start))

    def _release_deferred(self, request_id: str) -> None:
        for rid in self.deferred.pop(request_id, []):
            waiting = self.mains.get(rid)
            if waiting is not None and not waiting.pulled:
                self._pull(waiting)

    def _import(self, src: str, kv: KVData, main: _Main) -> None:
        """Import ``kv`` (admitted: its reservation is held) and move the request on."""
        from executor.engine import PrefixMissingError

        o = main.order
        t_import = time.perf_counter()
        try:
            req = self.engine.import_kv([*o.prompt, kv.first_token], KVPayload.from_bytes(kv.payload, copy=False),
                                        sampling_from(o.sampling), num_prompt_tokens=len(o.prompt))
        except PrefixMissingError:
            self.counters["repulls"] += 1
            self._pull(main)
            return
        main.phases |= kv_phases("md", kv, self.received_at, main.pulled_at, time.perf_counter() - t_import)
        self.send(src, KVDone(kv.request_id, imported=True))
        self.counters["kv_received_bytes"] += len(kv.payload)
        self.counters["drc_hit_tokens"] += kv.start
        main.request = req
        self._release_deferred(kv.request_id)
        main.info |= {"md_cached_tokens": kv.start, "kv_received_bytes": len(kv.payload),
                      "kv_received_tokens": kv.end - kv.start}
        if main.relay_finished:  # the relay already served it: keep the KV cached, nothing to decode
            self._forget(main)
            return
        if o.relay is None:
            main.state = MainState.DECODING
            self._advance(main)
        else:
            main.state = MainState.WAIT_HANDOFF
            self.send(o.relay, MainReady(o.request_id))

    def on_handoff(self, src: str, h: HandoffTokens) -> None:
        main = self.mains.get(h.request_id)
        if main is None or main.state not in (MainState.WAIT_HANDOFF, MainState.CATCHING_UP):
            return
        req, n = main.request, len(main.order.prompt)
        t0 = time.perf_counter()
        forwarded = 0
        if h.tokens:
            keep = n + h.first_index
            if len(req.token_ids) < keep or req.num_kv_tokens > keep:
                raise ValueError(f"handoff batch starts at output index {h.first_index} but MD has "
                                 f"{len(req.token_ids) - n} output tokens ({req.num_kv_tokens - n} with KV)")
            del req.token_ids[keep:]  # drop our own guesses (pending, no KV) from first_index on
            forwarded = self.engine.extend(req, h.tokens).num_forwarded
        elif len(req.token_ids) < n + h.first_index + 1:
            forwarded = self.engine.extend(req, []).num_forwarded
        extend_s = time.perf_counter() - t0
        info = main.info
        info["handoff_mode"] = h.mode
        info["handoff_rounds"] = h.round
        info["handoff_tokens"] = info.get("handoff_tokens", 0) + len(h.tokens)
        info["handoff_msg_bytes"] = info.get("handoff_msg_bytes", 0) + len(encode(h))
        info["handoff_kv_bytes_replaced"] = info.get("handoff_kv_bytes_replaced", 0) + \
            forwarded * self.kv_bytes_per_token
        info["extend_s"] = info.get("extend_s", 0.0) + extend_s
        self.counters["extend_tokens"] += forwarded
        if not h.final:
            main.state = MainState.CATCHING_UP
            self.send(src, HandoffAck(h.request_id, h.first_index + len(h.tokens) - 1, h.round))
            return
        main.state = MainState.DECODING
        main.streamed = h.streamed_upto + 1
        info["relay_tokens"] = main.streamed
        info["handoff_latency_s"] = max(0.0, time.time() - h.sent_at_unix_s)
        self.counters["handoffs"] += 1
        self._advance(main)

    def on_relay_finished(self, src: str, msg: RelayFinished) -> None:
        main = self.mains.get(msg.request_id)
        if main is None:
            return
        if main.state is MainState.WAIT_KV:
            main.relay_finished = True
        elif main.state in (MainState.WAIT_HANDOFF, MainState.CATCHING_UP):
            self._forget(main)

    # ---- decoding ----------------------------------------------------------------------

    def has_work(self) -> bool:
        return any(m.state is MainState.DECODING for m in self.mains.values())

    def step(self) -> None:
        batch = [m for m in self.mains.values() if m.state is MainState.DECODING]
        self.engine.decode_step([m.request for m in batch])
        self.counters["decode_steps"] += 1
        for main in batch:
            self._advance(main)

    def on_step_error(self, exc: Exception) -> None:
        for rid, m in list(self.mains.items()):
            if m.state is MainState.DECODING:
                self.fail(rid, f"MD {self.name}: decode failed: {type(exc).__name__}: {exc}")

    def _advance(self, main: _Main) -> None:
        """Stream the tokens MD owns that the router has not seen; finish at EOS / budget."""
        reason = stop_reason(main.request)
        outputs = main.request.output_ids
        new = outputs[main.streamed :]
        if new or reason:
            info = dict(main.info) if reason else {}
            if main.phases:  # with the first batch this MD streams
                info |= main.phases | {"md_t0_sent_unix_s": time.time()}
                main.phases = {}
            self.send(main.order.reply_to, Tokens(main.order.request_id, main.streamed, new, self.name, reason, info))
            self.counters["tokens_streamed"] += len(new)
            main.streamed = len(outputs)
        if reason is not None:
            self.counters["finished_here"] += 1
            self._forget(main)

    def _forget(self, main: _Main) -> None:
        if main.request is not None:
            self.engine.finish(main.request)
        self.mains.pop(main.order.request_id, None)
        self._release_deferred(main.order.request_id)
        self._release_kv(main.order.request_id)

    def _kv_waiter(self, request_id: str) -> _Main | None:
        main = self.mains.get(request_id)
        return main if main is not None and main.state is MainState.WAIT_KV else None

    def tick(self, now: float) -> None:
        late = [r for r, x in self.mains.items() if x.state is MainState.WAIT_KV and now - x.created_at > self.kv_wait_s]
        for rid in late:
            self.fail(rid, f"{self.ROLE} {self.name}: the KV did not arrive within {self.kv_wait_s:g} s")

    def drop_request(self, request_id: str) -> None:
        main = self.mains.get(request_id)
        if main is not None:
            self._forget(main)

    def stats_live(self) -> int:
        return len(self.mains)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "live": len(self.mains),
                "decoding": sum(m.state is MainState.DECODING for m in self.mains.values())}
