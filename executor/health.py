"""Heartbeats → peer state: UP, SUSPECT, DOWN; overload is reported apart from availability.

In: the router's pings (`sent`) and the instances' pongs (`answered`, with their load).
Out: each peer's `PeerState`, and each transition (returned by `sent`, `send_failed`,
`answered`, `mark_down`) for the router to act on.

A peer that misses `suspect_after` heartbeats in a row is SUSPECT (still routable,
picked last); `down_after` in a row, or a failed send, counts towards DOWN (not
routable; the router moves or fails what it held). Any pong brings it back UP — a
healed line or a restarted instance rejoins without a manual step. Load never
changes the state: a busy instance answers pings (on its channel thread) with its
load, so it is *overloaded* (admission's concern), not unavailable. No torch, no threads.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field


class PeerState(enum.Enum):
    UP = "up"
    SUSPECT = "suspect"
    DOWN = "down"


@dataclass
class PeerHealth:
    state: PeerState = PeerState.UP
    missed: int = 0  # heartbeats without an answer since the last pong
    load: int = 0
    last_pong_at: float = field(default_factory=time.monotonic)
    answered_once: bool = False  # a handshake: the peer answered at its current address


class HealthMonitor:
    """Per-peer heartbeat bookkeeping; the router calls it under its own lock."""

    def __init__(self, interval_s: float = 0.5, suspect_after: int = 2, down_after: int = 4) -> None:
        if not 0 < suspect_after <= down_after:
            raise ValueError(f"need 0 < suspect_after <= down_after, got {suspect_after}, {down_after}")
        self.interval_s, self.suspect_after, self.down_after = interval_s, suspect_after, down_after
        self.peers: dict[str, PeerHealth] = {}

    def add(self, name: str) -> None:
        """(Re)start tracking `name` as UP, waiting for its first answer."""
        self.peers[name] = PeerHealth()

    def remove(self, name: str) -> None:
        self.peers.pop(name, None)

    def state(self, name: str) -> PeerState:
        p = self.peers.get(name)
        return p.state if p is not None else PeerState.DOWN

    def ready(self, name: str) -> bool:
        """Answered a heartbeat at its current address and is not DOWN."""
        p = self.peers.get(name)
        return p is not None and p.answered_once and p.state is not PeerState.DOWN

    def sent(self, name: str) -> PeerState | None:
        """A heartbeat went out (or could not); returns the new state if it changed."""
        p = self.peers.get(name)
        if p is None:
            return None
        p.missed += 1
        return self._update(p)

    def send_failed(self, name: str) -> PeerState | None:
        """A send to `name` failed outright (closed, refused): as good as a missed heartbeat."""
        return self.sent(name)

    def answered(self, name: str, load: int = 0) -> PeerState | None:
        p = self.peers.get(name)
        if p is None:
            return None
        p.missed, p.load, p.last_pong_at, p.answered_once = 0, load, time.monotonic(), True
        return self._update(p)

    def mark_down(self, name: str) -> PeerState | None:
        """Known dead (an actor exited): DOWN at once."""
        p = self.peers.get(name)
        if p is None or p.state is PeerState.DOWN:
            return None
        p.state, p.missed = PeerState.DOWN, self.down_after
        return PeerState.DOWN

    def _update(self, p: PeerHealth) -> PeerState | None:
        new = (PeerState.DOWN if p.missed >= self.down_after else
               PeerState.SUSPECT if p.missed >= self.suspect_after else PeerState.UP)
        if new is p.state:
            return None
        p.state = new
        return new

    def snapshot(self) -> dict[str, str]:
        return {n: p.state.value for n, p in self.peers.items()}
