"""What each of an engine's forwards cost as it served: a bounded log of prefills, extends, steps.

In: one call per role operation from ``Engine`` — ``prefill``, ``extend``, ``decode_step`` (kind,
size, context, the thread CPU and wall clocks when it began; the scheduler's mixed batches,
``Engine.step``, are not logged: no single table phase costs them). Out: :class:`ForwardRecord`
rows, the newest ``capacity`` of them.

The profile's measured table (``placer profile model``) says what a forward of a given shape
costs on a quiet engine; this log says what the same shapes cost while serving — beside the
router, the transport and the other instances of the process. ``bench/bench_serve.py`` divides
one by the other to show how far the table was from the forwards it served.

Sizes and contexts are the table's axes: a prefill or extend forwards ``size`` new tokens after
``context`` cached ones; a decode step runs ``size`` sequences of ``context`` tokens each on
average. Clocks: ``time.thread_time`` (the engine thread's CPU seconds) and
``time.perf_counter``. No torch, no locks (one engine is driven by one thread).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

KINDS = ("prefill", "extend", "decode")


@dataclass(frozen=True, slots=True)
class ForwardRecord:
    kind: str  # prefill | extend | decode
    size: int  # new tokens (prefill, extend) or sequences (decode)
    context: float  # cached tokens before the forward, or mean tokens per sequence (decode)
    cpu_s: float  # the engine thread's CPU seconds
    wall_s: float
    at: float = 0.0  # time.perf_counter() when it began (to place it beside the requests it served)


class ForwardLog:
    """The newest ``capacity`` forwards of one engine (older ones drop off)."""

    def __init__(self, capacity: int = 20_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._rows: deque[ForwardRecord] = deque(maxlen=capacity)

    @staticmethod
    def clocks() -> tuple[float, float]:
        """(thread CPU, wall) now: what :meth:`add` takes as the forward's start."""
        return time.thread_time(), time.perf_counter()

    def add(self, kind: str, size: int, context: float, start: tuple[float, float]) -> None:
        """A forward that began at ``start`` (from :meth:`clocks`) ended now."""
        cpu, wall = self.clocks()
        self._rows.append(ForwardRecord(kind, size, float(context), cpu - start[0], wall - start[1], start[1]))

    def records(self, kind: str | None = None) -> list[ForwardRecord]:
        return [r for r in self._rows if kind is None or r.kind == kind]

    def clear(self) -> None:
        self._rows.clear()

    def __len__(self) -> int:
        return len(self._rows)
