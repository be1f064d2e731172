"""One client stream from tokens that arrive from several instances: gap-free and duplicate-free.

In: batches `(start_index, tokens)` from RLD and MD, in any order, possibly
overlapping at the handoff seam. Out: the tokens in index order, each index once, as
soon as every earlier index has arrived; `done` once the final index is out.

Every index has exactly one owner in the protocol (RLD up to the handoff, MD after),
so an index seen twice is a duplicate to drop; seen twice with *different* tokens it
is a conflict (counted: a protocol bug, or sampling that diverged). No torch here.
"""

from __future__ import annotations


class StreamAssembler:
    """Reorders and de-duplicates one request's output tokens by index."""

    def __init__(self) -> None:
        self.next_index = 0
        self.delivered: list[int] = []
        self._buffer: dict[int, int] = {}
        self.final_index: int | None = None
        self.finish_reason: str | None = None
        self.duplicates = 0
        self.conflicts = 0

    def add(self, start_index: int, tokens: list[int], finish_reason: str | None = None) -> list[int]:
        """Take a batch; return the tokens that are now deliverable, in order."""
        if start_index < 0:
            raise ValueError(f"start_index must be >= 0, got {start_index}")
        for i, tok in enumerate(tokens, start_index):
            known = self.delivered[i] if i < self.next_index else self._buffer.get(i)
            if known is not None:
                self.duplicates += 1
                self.conflicts += int(known != tok)
                continue
            self._buffer[i] = tok
        if finish_reason is not None and self.final_index is None:
            self.final_index = start_index + len(tokens) - 1
            self.finish_reason = finish_reason
        out = []
        while self.next_index in self._buffer and (self.final_index is None or self.next_index <= self.final_index):
            tok = self._buffer.pop(self.next_index)
            out.append(tok)
            self.delivered.append(tok)
            self.next_index += 1
        return out

    def rewind(self) -> int:
        """Forget what arrived but was not delivered (a new attempt resends it); the index to resume at."""
        self._buffer.clear()
        self.final_index, self.finish_reason = None, None
        return self.next_index

    @property
    def done(self) -> bool:
        return self.final_index is not None and self.next_index > self.final_index

    @property
    def missing(self) -> list[int]:
        """Indices below the highest one seen that have not arrived (a gap, while waiting)."""
        top = max(self._buffer, default=self.next_index - 1)
        return [i for i in range(self.next_index, top) if i not in self._buffer]
