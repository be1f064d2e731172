"""The transfer interface every channel implements: a poll state and a deadline per transfer.

In: a destination name and a message. Out: a `Transfer` whose `state` moves
PENDING → TRANSFERRING → DONE, or to FAILED (an error, or its deadline passed); the
receiver's handler gets `(source name, message)` once the whole message arrived.

DONE means the receiver has the whole message (it acknowledged it), not merely that
the bytes left the sender. A transfer past its deadline is FAILED at the next `poll`
(or by the channel's watchdog) and the channel stops sending its remaining bytes.
Thread-safe: channels update a transfer from their I/O thread while roles poll it.
No torch here.
"""

from __future__ import annotations

import enum
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from executor.transport.messages import Message

Handler = Callable[[str, Message], None]

DEFAULT_DEADLINE_S = 60.0


class TransportError(RuntimeError):
    """A channel could not deliver (unknown peer, closed endpoint, broken connection)."""


class TransferState(enum.Enum):
    PENDING = "pending"  # queued, no byte sent yet
    TRANSFERRING = "transferring"  # some bytes on the way
    DONE = "done"  # the receiver has the whole message
    FAILED = "failed"  # error or deadline passed; `error` says which


_ids = itertools.count()


class Transfer:
    """One message on its way: state, progress, deadline."""

    def __init__(self, src: str, dst: str, message: Message, num_bytes: int, deadline_s: float | None) -> None:
        self.transfer_id = f"{src}#{next(_ids)}"
        self.src, self.dst, self.message = src, dst, message
        self.message_type = message.type_name
        self.bytes_total = num_bytes
        self.bytes_sent = 0
        self.created_at = time.monotonic()
        self.deadline_at = self.created_at + (DEFAULT_DEADLINE_S if deadline_s is None else deadline_s)
        self.finished_at: float | None = None
        self.error: str | None = None
        self._state = TransferState.PENDING
        self._cond = threading.Condition()
        self._callbacks: list[Callable[[Transfer], None]] = []

    # ---- reading ---------------------------------------------------------------------

    @property
    def state(self) -> TransferState:
        return self._state

    def poll(self) -> TransferState:
        """The current state; a transfer past its deadline becomes FAILED here."""
        if self._state in (TransferState.PENDING, TransferState.TRANSFERRING) and time.monotonic() > self.deadline_at:
            self.fail(f"deadline exceeded after {self.deadline_at - self.created_at:.3f} s "
                      f"({self.bytes_sent}/{self.bytes_total} bytes sent)")
        return self._state

    @property
    def finished(self) -> bool:
        return self.poll() in (TransferState.DONE, TransferState.FAILED)

    @property
    def elapsed_s(self) -> float:
        end = self.finished_at if self.finished_at is not None else time.monotonic()
        return end - self.created_at

    def wait(self, timeout_s: float | None = None) -> TransferState:
        """Block until DONE or FAILED (or `timeout_s`); returns the state."""
        end = time.monotonic() + (timeout_s if timeout_s is not None else 1e9)
        with self._cond:
            while self._state not in (TransferState.DONE, TransferState.FAILED):
                left = min(end, self.deadline_at) - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.05))
        return self.poll()

    def on_finish(self, fn: Callable[[Transfer], None]) -> None:
        """Call `fn(transfer)` once it is DONE or FAILED (at once if it already is)."""
        with self._cond:
            if self._state not in (TransferState.DONE, TransferState.FAILED):
                self._callbacks.append(fn)
                return
        fn(self)

    # ---- updates by the channel --------------------------------------------------------

    def progress(self, n: int) -> None:
        with self._cond:
            if self._state is TransferState.PENDING:
                self._state = TransferState.TRANSFERRING
            self.bytes_sent += n

    def done(self) -> None:
        self._finish(TransferState.DONE, None)

    def fail(self, error: str) -> None:
        self._finish(TransferState.FAILED, error)

    def _finish(self, state: TransferState, error: str | None) -> None:
        with self._cond:
            if self._state in (TransferState.DONE, TransferState.FAILED):
                return
            self._state, self.error, self.finished_at = state, error, time.monotonic()
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for fn in callbacks:
            fn(self)

    def __repr__(self) -> str:
        return (f"Transfer({self.transfer_id} {self.message_type} {self.src}->{self.dst} "
                f"{self._state.value} {self.bytes_sent}/{self.bytes_total}B)")


@dataclass(frozen=True)
class PeerInfo:
    """Where an endpoint lives: its datacenter and (for socket channels) its address."""

    name: str
    datacenter: str
    address: str | None = None  # "host:port"


class Endpoint(Protocol):
    """One instance's side of the network."""

    name: str
    datacenter: str

    def send(self, dst: str, message: Message, *, deadline_s: float | None = None) -> Transfer:
        """Queue `message` for `dst`; never blocks on the network."""
        ...

    def set_handler(self, handler: Handler) -> None:
        """`handler(src, message)` runs (on the channel's thread) for each arrived message."""
        ...

    def close(self) -> None: ...
