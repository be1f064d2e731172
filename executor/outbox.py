"""The router's outbox: orders decided under its lock, sent after the lock is released.

In: `(destination, message, attempt id)` queued while the router holds its lock.
Out: each sent on the endpoint by `flush` (called with the lock released, so no
channel delivery ever waits on it); a send that raises, or a transfer that finishes
with an error, is reported to `on_failed(attempt_id, destination, error)` — a fault
of that attempt. Messages queued without an attempt id (e.g. `Cancel`) are fire and
forget. No torch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from executor.transport.base import Endpoint
from executor.transport.messages import Message


class Outbox:
    """A thread-safe queue of orders in front of an endpoint."""

    def __init__(self, endpoint: Endpoint, on_failed: Callable[[str, str, str], None]) -> None:
        self.endpoint, self.on_failed = endpoint, on_failed
        self._queue: deque[tuple[str, Message, str | None]] = deque()
        self._lock = threading.Lock()

    def put(self, dst: str, msg: Message, attempt_id: str | None) -> None:
        with self._lock:
            self._queue.append((dst, msg, attempt_id))

    def flush(self) -> None:
        """Send everything queued; a failed order is reported to `on_failed`."""
        while True:
            with self._lock:
                if not self._queue:
                    return
                dst, msg, aid = self._queue.popleft()
            try:
                t = self.endpoint.send(dst, msg)
            except Exception as exc:  # noqa: BLE001 - closed endpoint, unknown peer, broken socket: a fault
                if aid is not None:
                    self.on_failed(aid, dst, str(exc))
                continue
            if aid is not None:
                t.on_finish(lambda t, aid=aid, dst=dst: self.on_failed(aid, dst, t.error) if t.error else None)
