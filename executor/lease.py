"""Leases on KV staged on P: freed when nobody makes progress, kept while a transfer does.

In: a time-to-live, the transfers that carry the staged KV, the clock. Out: whether
the lease has expired. A lease is renewed (`expires_at = now + ttl`) whenever one of
its transfers has sent more bytes since the last look — a slow WAN transfer that
keeps moving is never cut by the lease; one that stalls (or a consumer that vanished)
frees the KV `ttl` after its last progress. No torch, no threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Lease:
    ttl_s: float
    expires_at: float
    transfers: list[Any] = field(default_factory=list)
    _seen: dict[int, int] = field(default_factory=dict)  # id(transfer) → bytes_sent at the last look
    renewals: int = 0

    @classmethod
    def grant(cls, ttl_s: float, now: float) -> Lease:
        return cls(ttl_s, now + ttl_s)

    def watch(self, transfer: Any) -> None:
        """Renew while `transfer` (a `Transfer`) makes progress."""
        if transfer is not None:
            self.transfers.append(transfer)
            self._seen[id(transfer)] = transfer.bytes_sent

    def observe(self, now: float) -> bool:
        """Renew if any watched, unfinished transfer moved since the last look; returns whether it did."""
        moved = False
        for t in self.transfers:
            sent = t.bytes_sent
            if sent > self._seen.get(id(t), 0) and not t.finished:
                moved = True
            self._seen[id(t)] = sent
        self.transfers = [t for t in self.transfers if not t.finished]
        if moved:
            self.expires_at = max(self.expires_at, now + self.ttl_s)
            self.renewals += 1
        return moved

    def expired(self, now: float) -> bool:
        return now > self.expires_at
