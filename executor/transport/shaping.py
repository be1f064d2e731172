"""How an emulated WAN line behaves: rate, round trip, jitter, loss. Pure arithmetic, no I/O.

In: a line's figures (from the plan's link and the scenario's RTT/jitter) and the
current time. Out: when each frame has crossed the line's bandwidth (`LineClock`; or
how long to wait, `TokenBucket`) and when it arrives at the far end
(`LinkShape.arrival_delay_s`).

Model: one serialiser per direction of a line (`LineClock`), shared by every transfer
on it (so concurrent transfers share the rate, as TCP flows do); each frame then takes a
one-way delay of RTT/2 plus jitter (normal, standard deviation `jitter_ms`, never
negative), and frames of one connection never overtake each other (TCP order). With
`loss` (per packet), a frame that loses a packet is resent after a retransmission
timeout, delaying it and everything behind it on that connection, and its bytes
are paid twice.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

PACKET_BYTES = 1448  # TCP payload of one Ethernet frame
MIN_RTO_S = 0.2  # Linux's minimum retransmission timeout


@dataclass(frozen=True)
class LinkShape:
    """One WAN line, each direction: `gbit_per_s` of rate, `rtt_ms` round trip, jitter, loss."""

    gbit_per_s: float
    rtt_ms: float
    jitter_ms: float = 0.0
    loss: float = 0.0  # probability that one packet is lost

    def __post_init__(self) -> None:
        if not (self.gbit_per_s > 0 and math.isfinite(self.gbit_per_s)):
            raise ValueError(f"gbit_per_s must be a positive number, got {self.gbit_per_s}")
        for name in ("rtt_ms", "jitter_ms"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be >= 0, got {value}")
        if not 0 <= self.loss < 1:
            raise ValueError(f"loss must be in [0, 1), got {self.loss}")

    @property
    def bytes_per_s(self) -> float:
        return self.gbit_per_s * 1e9 / 8

    @property
    def one_way_s(self) -> float:
        return self.rtt_ms / 2000

    @property
    def rto_s(self) -> float:
        return max(MIN_RTO_S, 2 * self.rtt_ms / 1000)

    def arrival_delay_s(self, num_bytes: int, rng: random.Random) -> tuple[float, int]:
        """(delay from leaving the sender to arriving, extra bytes resent) for one frame."""
        delay = self.one_way_s
        if self.jitter_ms:
            delay = max(0.0, delay + rng.gauss(0.0, self.jitter_ms / 1000))
        resent = 0
        if self.loss:
            packets = max(1, math.ceil(num_bytes / PACKET_BYTES))
            p_any = 1.0 - (1.0 - self.loss) ** packets
            while rng.random() < p_any:  # each retransmission may be lost again
                delay += self.rto_s
                resent += PACKET_BYTES
                p_any = self.loss
        return delay, resent

    def transfer_estimate_s(self, num_bytes: float) -> float:
        """Seconds one transfer of `num_bytes` takes on an idle line (rate + one round trip)."""
        return num_bytes / self.bytes_per_s + self.rtt_ms / 1000


class TokenBucket:
    """Bytes-per-second pacing with a small burst; time is passed in (testable without sleeping).

    `reserve(n, now)` takes n bytes of credit (going into debt if needed) and returns
    how long the caller must wait before sending them. Reservations are served in
    call order, so whoever shares the bucket shares the rate.
    """

    def __init__(self, bytes_per_s: float, burst_bytes: int, now: float = 0.0) -> None:
        if bytes_per_s <= 0:
            raise ValueError(f"bytes_per_s must be > 0, got {bytes_per_s}")
        if burst_bytes <= 0:
            raise ValueError(f"burst_bytes must be > 0, got {burst_bytes}")
        self.bytes_per_s = float(bytes_per_s)
        self.burst_bytes = float(burst_bytes)
        self.tokens = float(burst_bytes)
        self.updated = now

    def reserve(self, num_bytes: int, now: float) -> float:
        if now > self.updated:
            self.tokens = min(self.burst_bytes, self.tokens + (now - self.updated) * self.bytes_per_s)
            self.updated = now
        self.tokens -= num_bytes
        return 0.0 if self.tokens >= 0 else -self.tokens / self.bytes_per_s


class LineClock:
    """The line's own timeline: frames are serialised back to back at `bytes_per_s`.

    `send(n, ready_at)` → (start, end): the frame starts when the line is free or when it
    was ready, whichever is later, and has crossed `n / bytes_per_s` later. Times are the
    line's, not the emulator's: an emulator thread woken late (a busy process, the GIL)
    computes the same start and end, so its lateness never costs the line capacity (a
    token bucket refilled at wake-up time, capped at a small burst, loses the credit of
    every late wake-up: 12-21 % of a 200 Mbit/s line in a busy process).
    """

    def __init__(self, bytes_per_s: float, now: float = 0.0) -> None:
        if bytes_per_s <= 0:
            raise ValueError(f"bytes_per_s must be > 0, got {bytes_per_s}")
        self.bytes_per_s = float(bytes_per_s)
        self.free_at = now

    def send(self, num_bytes: int, ready_at: float) -> tuple[float, float]:
        start = max(self.free_at, ready_at)
        self.free_at = start + num_bytes / self.bytes_per_s
        return start, self.free_at
