"""In-process fake channel for unit tests: messages really encode and decode, nothing sleeps.

In: endpoints registered on one `FakeNetwork`. Out: each `send` encodes the message,
decodes it again (so every message the protocol uses is proven wire-safe) and hands
it to the destination's handler.

Two modes: `auto` (default) delivers at once on the sender's thread — the transfer
goes PENDING → DONE; manual (`auto=False`) holds transfers PENDING until the test
calls `deliver()`, so tests can watch states and deadlines. `fail_next(dst)` makes
the next transfer to `dst` FAILED; `drop(dst)` loses every message to it (no
delivery: its transfers end FAILED at their deadline); `partition(dc_a, dc_b)` does
the same to every message between two datacenters (a cut WAN line) until `heal_partition`.
A closed endpoint's name can be taken again (an instance restarted under its name).
No torch, no threads.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque

from executor.transport.base import Handler, Transfer, TransferState, TransportError
from executor.transport.messages import Message, decode, encode


class FakeNetwork:
    """The shared wire of a group of `FakeEndpoint`s."""

    def __init__(self, auto: bool = True) -> None:
        self.auto = auto
        self.endpoints: dict[str, FakeEndpoint] = {}
        self.queue: deque[tuple[Transfer, bytes]] = deque()
        self.sent: list[Transfer] = []  # every transfer, in send order
        self._fail_next: dict[str, int] = {}
        self._dropped: set[str] = set()
        self._cut: set[frozenset[str]] = set()  # datacenter pairs whose line is down
        self._lock = threading.Lock()
        self._delivering = threading.RLock()  # one delivery at a time: per-pair order is kept

    def endpoint(self, name: str, datacenter: str = "dc-a") -> FakeEndpoint:
        if name in self.endpoints and not self.endpoints[name].closed:
            raise ValueError(f"endpoint {name!r} already exists on this network")
        ep = FakeEndpoint(self, name, datacenter)
        self.endpoints[name] = ep
        return ep

    def fail_next(self, dst: str, count: int = 1) -> None:
        self._fail_next[dst] = self._fail_next.get(dst, 0) + count

    def drop(self, dst: str) -> None:
        self._dropped.add(dst)

    def partition(self, dc_a: str, dc_b: str) -> None:
        """Lose every message between the two datacenters (both ways) until `heal_partition`."""
        self._cut.add(frozenset((dc_a, dc_b)))

    def heal_partition(self, dc_a: str, dc_b: str) -> None:
        self._cut.discard(frozenset((dc_a, dc_b)))

    def _is_cut(self, src: str, dst: str) -> bool:
        a, b = self.endpoints.get(src), self.endpoints.get(dst)
        return a is not None and b is not None and frozenset((a.datacenter, b.datacenter)) in self._cut

    def _send(self, src: str, dst: str, message: Message, deadline_s: float | None) -> Transfer:
        data = encode(message)
        transfer = Transfer(src, dst, message, len(data), deadline_s)
        with self._lock:
            self.sent.append(transfer)
            if self._fail_next.get(dst, 0) > 0:
                self._fail_next[dst] -= 1
                transfer.fail("injected failure")
                return transfer
            if dst not in self.endpoints or self.endpoints[dst].closed:
                transfer.fail(f"unknown or closed endpoint {dst!r}")
                return transfer
            if dst in self._dropped or self._is_cut(src, dst):
                return transfer  # never delivered: FAILED at its deadline
            self.queue.append((transfer, data))
        if self.auto:
            self.deliver()
        return transfer

    def deliver(self, max_messages: int | None = None) -> int:
        """Deliver queued messages in order; returns how many."""
        with self._delivering:
            return self._deliver(max_messages)

    def _deliver(self, max_messages: int | None) -> int:
        n = 0
        while max_messages is None or n < max_messages:
            with self._lock:
                if not self.queue:
                    break
                transfer, data = self.queue.popleft()
            if transfer.poll() is TransferState.FAILED:
                continue
            transfer.progress(len(data))
            dst = self.endpoints[transfer.dst]
            msg = decode(data)
            if dst.handler is not None:
                dst.handler(transfer.src, msg)
            transfer.done()
            n += 1
        return n


class FakeEndpoint:
    """One instance's side of a `FakeNetwork`; `address` differs for each incarnation of a name."""

    _incarnations = itertools.count()

    def __init__(self, network: FakeNetwork, name: str, datacenter: str) -> None:
        self.network, self.name, self.datacenter = network, name, datacenter
        self.address = f"fake://{name}/{next(self._incarnations)}"
        self.handler: Handler | None = None
        self.closed = False

    def send(self, dst: str, message: Message, *, deadline_s: float | None = None) -> Transfer:
        if self.closed:
            raise TransportError(f"endpoint {self.name!r} is closed")
        return self.network._send(self.name, dst, message, deadline_s)

    def set_handler(self, handler: Handler) -> None:
        self.handler = handler

    def close(self) -> None:
        self.closed = True
