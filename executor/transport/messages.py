"""Typed, versioned messages of the PDD protocol, and their wire bytes.

In: a message dataclass. Out: self-describing bytes (and back).

Wire format of one message: a 4-byte big-endian length, a JSON envelope
`{"type": NAME, "version": N, "fields": {...}}`, then an optional binary body (only
`KVData` has one: the KV payload's own self-describing bytes). Fields are decoded
*by name*: a reader ignores fields it does not know (so a newer sender may add
fields), fills defaults for fields it lacks, and refuses a message whose `version`
is newer than the one it reads, or whose type it does not know, with `MessageError`
naming what is wrong. No torch here; imports only the placer base layer (`placer.flows`).

Protocol (see `executor/roles/`): router → P `PrefillOrder`, router → RLD
`RelayOrder`, router → MD `MainOrder`; a KV consumer → P `KVPull`, P → consumer
`KVData`, consumer → P `KVDone`; MD → RLD `MainReady`; RLD → MD `HandoffTokens`
(one or more batches, the last `final`), MD → RLD `HandoffAck`; RLD → MD
`RelayFinished`; RLD/MD → router `Tokens`; P → router `PrefillDone`; any → router
`RequestError`; router → any `Cancel`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from placer import pdd
ENVELOPE_LEN_BYTES = 4


class MessageError(ValueError):
    """Bytes that are not a message this reader understands."""


_REGISTRY: dict[str, type[Message]] = {}


@dataclass(frozen=True)
class Message:
    """Base of every protocol message. Subclasses are frozen dataclasses with a VERSION."""

    VERSION: ClassVar[int] = 1
    HAS_BODY: ClassVar[bool] = False

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _REGISTRY[cls.__name__] = cls

    @property
    def type_name(self) -> str:
        return type(self).__name__

    def body(self) -> bytes:
        return b""

    def fields_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "payload"}


def encode(msg: Message) -> bytes:
    """The wire bytes of `msg` (envelope + body)."""
    envelope = json.dumps(
        {"type": msg.type_name, "version": msg.VERSION, "fields": msg.fields_dict()},
        separators=(",", ":"),
    ).encode()
    return len(envelope).to_bytes(ENVELOPE_LEN_BYTES, "big") + envelope + msg.body()


def encoded_size(msg: Message) -> int:
    """len(encode(msg)) without copying the body."""
    envelope = json.dumps(
        {"type": msg.type_name, "version": msg.VERSION, "fields": msg.fields_dict()},
        separators=(",", ":"),
    ).encode()
    return ENVELOPE_LEN_BYTES + len(envelope) + len(msg.body())


def decode(data: bytes | bytearray | memoryview) -> Message:
    """Parse `encode` output; raises `MessageError` on anything unexpected."""
    data = memoryview(data)
    if len(data) < ENVELOPE_LEN_BYTES:
        raise MessageError(f"message too short ({len(data)} bytes)")
    n = int.from_bytes(data[:ENVELOPE_LEN_BYTES], "big")
    if ENVELOPE_LEN_BYTES + n > len(data):
        raise MessageError(f"envelope length {n} exceeds the {len(data)} bytes received")
    try:
        env = json.loads(bytes(data[ENVELOPE_LEN_BYTES : ENVELOPE_LEN_BYTES + n]))
        name, version, fields = env["type"], int(env["version"]), dict(env["fields"])
    except (ValueError, KeyError, TypeError) as exc:
        raise MessageError(f"message envelope is not valid: {exc!r}") from exc
    cls = _REGISTRY.get(name)
    if cls is None:
        raise MessageError(f"unknown message type {name!r}")
    if version > cls.VERSION:
        raise MessageError(f"{name} version {version} is newer than this reader's version {cls.VERSION}")
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in fields.items() if k in known}
    if cls.HAS_BODY:
        kwargs["payload"] = bytes(data[ENVELOPE_LEN_BYTES + n :])
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise MessageError(f"{name}: missing or bad fields: {exc}") from exc


# ---- request orders (router → instances) -------------------------------------------


@dataclass(frozen=True)
class Sampling:
    """Sampling settings as they travel (mirrors the engine's SamplingParams)."""

    temperature: float = 0.0
    seed: int = 0
    max_new_tokens: int = 16
    stop_at_eos: bool = True


def sampling_to_dict(s: Any) -> dict[str, Any]:
    """Sampling settings as orders carry them: from a dict (missing keys take `Sampling`'s defaults)
    or an object with `Sampling`'s attributes (e.g. the engine's `SamplingParams`).

    Raises ValueError naming a budget below 1 or a negative temperature.
    """
    if isinstance(s, dict):
        d = {**dataclasses.asdict(Sampling()), **s}
    else:
        d = {f.name: getattr(s, f.name) for f in dataclasses.fields(Sampling)}
    if int(d["max_new_tokens"]) < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {d['max_new_tokens']}")
    if float(d["temperature"]) < 0:
        raise ValueError(f"temperature must be >= 0, got {d['temperature']}")
    return d


@dataclass(frozen=True)
class PrefillOrder(Message):
    """Router → P: prefill `prompt` and stage its KV for `consumers` (who will pull it)."""

    request_id: str
    prompt: list[int]
    sampling: dict[str, Any]
    consumers: list[str]
    reply_to: str
    lease_s: float = 30.0


@dataclass(frozen=True)
class RelayOrder(Message):
    """Router → RLD: relay-decode a request from P's KV; hand over to `main` (None: filtered)."""

    request_id: str
    prompt: list[int]
    sampling: dict[str, Any]
    prefill: str
    main: str | None
    reply_to: str
    handoff_mode: str = pdd.ADAPTIVE  # one of pdd.HANDOFF_MODES
    catch_up_threshold_tokens: int = pdd.DEFAULT_CATCH_UP_THRESHOLD_TOKENS
    #: the catch-up rule (pdd.CatchUpRule) the serving config sets; an older sender's order lacks
    #: them and gets pdd's defaults
    final_batch_tokens: int = pdd.DEFAULT_CATCH_UP.final_batch_tokens
    max_rounds: int = pdd.DEFAULT_CATCH_UP.max_rounds


@dataclass(frozen=True)
class MainOrder(Message):
    """Router → MD: pull the uncached KV from P (DRC) and decode, after `relay`'s handoff if any."""

    request_id: str
    prompt: list[int]
    sampling: dict[str, Any]
    prefill: str
    relay: str | None
    reply_to: str


# ---- KV movement ---------------------------------------------------------------------


@dataclass(frozen=True)
class KVPull(Message):
    """Consumer → P: send the prompt's KV from position `start` (what I lack)."""

    request_id: str
    start: int


@dataclass(frozen=True)
class KVData(Message):
    """P → consumer: the prompt KV from `start` and P's first token; body = KV payload bytes."""

    HAS_BODY: ClassVar[bool] = True

    request_id: str
    start: int
    end: int
    first_token: int
    num_cached_tokens: int
    payload: bytes = b""
    pull_wait_s: float = 0.0  # P: the pull's arrival → served (waiting behind a prefill or the order)
    export_s: float = 0.0  # P: export_kv + serialisation of this payload
    sent_at_unix_s: float = 0.0  # P's clock when it sent this (transfer time where clocks agree)

    def body(self) -> bytes:
        return self.payload


@dataclass(frozen=True)
class KVDone(Message):
    """Consumer → P: I no longer need the staged KV (`imported` says whether I used it)."""

    request_id: str
    imported: bool = True


# ---- relay ↔ main handoff ------------------------------------------------------------


@dataclass(frozen=True)
class MainReady(Message):
    """MD → RLD: I hold the request's prompt KV; hand over your token ids."""

    request_id: str


@dataclass(frozen=True)
class HandoffTokens(Message):
    """RLD → MD: output tokens `first_index ..` (token ids, not KV).

    `final`: RLD has stopped; MD owns the stream from `streamed_upto + 1` on.
    """

    request_id: str
    first_index: int
    tokens: list[int]
    final: bool
    streamed_upto: int
    mode: str  # pdd.ONE_SHOT | pdd.CATCH_UP
    round: int = 1
    sent_at_unix_s: float = field(default_factory=time.time)


@dataclass(frozen=True)
class HandoffAck(Message):
    """MD → RLD (catch-up): I have KV for output tokens up to `upto_index`."""

    request_id: str
    upto_index: int
    round: int


@dataclass(frozen=True)
class RelayFinished(Message):
    """RLD → MD: the request ended on RLD before the handoff; release it."""

    request_id: str
    reason: str


@dataclass(frozen=True)
class Cancel(Message):
    """Router → instance: the request ended (error, timeout, client gone); drop what you hold."""

    request_id: str
    reason: str


# ---- to the router -----------------------------------------------------------------------


@dataclass(frozen=True)
class Tokens(Message):
    """RLD/MD → router: output tokens `start_index ..`; `finish_reason` set on the last batch."""

    request_id: str
    start_index: int
    tokens: list[int]
    source: str
    finish_reason: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PrefillDone(Message):
    """P → router: prefill finished (prefix-hit tokens, seconds)."""

    request_id: str
    num_cached_tokens: int
    prefill_s: float
    source: str
    queue_s: float = 0.0  # the order's arrival at P → its prefill started (inbox + FCFS queue)


@dataclass(frozen=True)
class RequestError(Message):
    """Any instance → router: this request failed."""

    request_id: str
    source: str
    error: str


# ---- health ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ping(Message):
    """Router → instance: a heartbeat (answered on the channel's thread, not after queued work)."""

    seq: int
    sent_at: float = 0.0


@dataclass(frozen=True)
class Pong(Message):
    """Instance → router: alive; `load` (live requests + queued messages) tells overload apart."""

    seq: int
    source: str
    load: int = 0
