"""The one rule for a failed attempt: what the router does when an instance of a request fails.

In: a live request, the suspect instance (gone DOWN, unreachable, stalled, or leaving
gracefully) and the attempt limit. Out: a `FaultAction`.

| the suspect is | nothing reached the client | tokens reached the client |
| --- | --- | --- |
| P | RETRY (another P) | IGNORE: the decoders hold the KV |
| RLD, MD already streams | IGNORE: the handoff is done | IGNORE |
| RLD, the only streamer | RETRY avoiding it | FAIL: a clear error, never a silent re-run |
| MD (or a stalled MD pipeline) | RETRY, RLD in P's DC if any (*fallback*) | MIGRATE: from the next index |
| A (aggregated: prefills and decodes alone) | RETRY (another A) | MIGRATE: from the next index |
| not in the current attempt | RETRY | IGNORE |

A migration prefills `prompt + delivered` and streams on from the next index (RLD,
or another MD). A graceful fault (an instance of the attempt is leaving, alive) is
always retried or migrated: what it holds is moved. Past `max_attempts` attempts any
retry or migration is GIVE_UP. No torch, no threads.
"""

from __future__ import annotations

import enum

from executor.live import LiveRequest
from placer import pdd
class FaultAction(enum.Enum):
    IGNORE = "ignore"  # nothing to do for this request
    FAIL = "fail"  # end it with an error event, not retried
    GIVE_UP = "give-up"  # end it with an error: no attempt left
    RETRY = "retry"  # a new attempt from scratch
    MIGRATE = "migrate"  # a new attempt from the next undelivered index


def fault_action(live: LiveRequest, suspect: str | None, *, graceful: bool, max_attempts: int) -> FaultAction:
    """What to do about `live` when `suspect` failed (see the module doc)."""
    role = live.role_of(suspect)
    delivered = live.assembler.next_index
    if role == pdd.P and delivered > 0 and not graceful:
        return FaultAction.IGNORE
    if role == pdd.RLD and not graceful and live.instances.get(pdd.MD) in live.streamers:
        return FaultAction.IGNORE
    if delivered > 0 and role == pdd.RLD and not graceful and not (live.streamers - {suspect}):
        return FaultAction.FAIL
    if delivered > 0 and role is None and suspect is not None:
        return FaultAction.IGNORE
    if live.attempt + 1 >= max_attempts:
        return FaultAction.GIVE_UP
    return FaultAction.RETRY if delivered == 0 else FaultAction.MIGRATE
