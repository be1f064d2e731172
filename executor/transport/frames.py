"""Frames on a socket: how messages are cut into chunks so transfers share a connection.

In: a named header (dict) and body bytes. Out: one frame on an asyncio stream (and back).

Frame: 4-byte header length, 4-byte body length (big-endian), the header as JSON
(named fields, `frame` kind and `v` version), then the body. Kinds:
`hello` (first frame of a connection: who is calling whom), `chunk` (bytes
`offset..offset+len` of transfer `transfer`, whose message is `total` bytes long),
`abort` (the sender gave up on a transfer), `ack` / `nack` (the receiver has the
whole message / could not decode it). Also the I/O loop thread each process shares.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from typing import Any

FRAME_VERSION = 1
_LEN = 4
MAX_HEADER_BYTES = 1 << 20


class FrameError(ValueError):
    """A frame that is malformed or of an unknown version."""


def pack(header: dict[str, Any], body: bytes | memoryview = b"") -> bytes:
    head = json.dumps({**header, "v": FRAME_VERSION}, separators=(",", ":")).encode()
    return len(head).to_bytes(_LEN, "big") + len(body).to_bytes(_LEN, "big") + head + bytes(body)


async def read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, Any], bytes, int]:
    """(header, body, wire bytes) of the next frame; `asyncio.IncompleteReadError` at EOF."""
    lens = await reader.readexactly(2 * _LEN)
    n_head, n_body = int.from_bytes(lens[:_LEN], "big"), int.from_bytes(lens[_LEN:], "big")
    if n_head > MAX_HEADER_BYTES:
        raise FrameError(f"frame header of {n_head} bytes exceeds {MAX_HEADER_BYTES}")
    raw = await reader.readexactly(n_head)
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise FrameError(f"frame header is not JSON: {exc}") from exc
    if not isinstance(header, dict) or "frame" not in header:
        raise FrameError(f"frame header lacks 'frame': {header!r}")
    if int(header.get("v", 0)) > FRAME_VERSION:
        raise FrameError(f"frame version {header.get('v')} is newer than {FRAME_VERSION}")
    body = await reader.readexactly(n_body) if n_body else b""
    return header, body, 2 * _LEN + n_head + n_body


class IoLoop:
    """One asyncio loop on a daemon thread per process, shared by every socket channel."""

    _instance: IoLoop | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="placer-io", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> IoLoop:
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = IoLoop()
            return cls._instance

    def run(self, coro: Coroutine[Any, Any, Any], timeout_s: float | None = 30.0) -> Any:
        """Run `coro` on the loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def call(self, fn: Any, *args: Any) -> None:
        """Call `fn(*args)` on the loop thread."""
        self.loop.call_soon_threadsafe(fn, *args)
