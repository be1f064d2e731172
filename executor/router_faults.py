"""The router's answer to a failed attempt: an order it could not deliver, an instance gone DOWN, a stall or
an instance leaving — `executor.faults`' rule (retry, migrate, fail, give up or ignore) applied to the request.

In: the failed attempt's request (`LiveRequest`), the instance suspected and the cause. Out: a new attempt
(from scratch or, migrating, from the next token the client has not had) on other instances with the old
attempt's instances told to drop it, or the request ended with the cause.

`RouterFaults` is a part of `executor.router.Router` (its base class): it works on the router's state
(`live`, `attempts`, `counters`, `health`, `_outbox`) and starts and ends attempts with the router's
`_start_attempt`, `_end` and `_unload`, always under the router's lock.
"""

from __future__ import annotations

from executor.admission import Overloaded
from executor.faults import FaultAction, fault_action
from executor.health import PeerState
from executor.live import LiveRequest
from executor.routing import NoRouteError, Pipeline
from executor.transport.messages import Cancel
from placer import pdd

ATTEMPT_ROLES = (pdd.P, pdd.RLD, pdd.MD, pdd.AGG)  # the roles an attempt holds load on


class RouterFaults:
    """What the router does when an attempt fails (see the module docstring)."""

    def _send_failed(self, aid: str, dst: str, error: str) -> None:
        with self._lock:
            self.counters["orders_undelivered"] += 1
            if self.health.send_failed(dst) is PeerState.DOWN:
                self.counters["peers_down"] += 1
                self._fault_all(dst, f"{dst} is down")
            live = self.live.get(self.attempts.get(aid, ""))
            if live is not None and live.attempt_id == aid:
                self._fault(live, dst, f"could not reach {dst}: {error}")
        self._outbox.flush()

    def _on_health_change(self, name: str, state: PeerState) -> None:
        self.counters[f"peers_{state.value}"] += 1
        if state is PeerState.DOWN:
            self._fault_all(name, f"{name} is down (missed {self.health.down_after} heartbeats)")

    def _fault_all(self, name: str, cause: str) -> None:
        for lv in [lv for lv in self.live.values() if name in lv.instances.values()]:
            self._fault(lv, name, cause)

    def _fault(self, live: LiveRequest, suspect: str | None, cause: str, *, graceful: bool = False) -> None:
        """One attempt failed: act on `executor.faults`' rule. Called under the lock."""
        if live.request_id not in self.live:
            return
        action = fault_action(live, suspect, graceful=graceful, max_attempts=self.config.max_attempts)
        if action is FaultAction.FAIL:
            self.counters["failures_after_first_token"] += 1
            self._end(live, None, f"{cause}: RLD {suspect} failed after {live.assembler.next_index} tokens "
                                  "reached the client; not retried", failed_at=suspect)
        elif action is FaultAction.GIVE_UP:
            self._end(live, None, f"{cause}; gave up after {live.attempt + 1} attempts", failed_at=suspect)
        elif action is not FaultAction.IGNORE:
            self._reattempt(live, suspect, cause, migrate=action is FaultAction.MIGRATE)

    def _reattempt(self, live: LiveRequest, suspect: str | None, cause: str, *, migrate: bool) -> None:
        """A new attempt avoiding `suspect`: from scratch, or (`migrate`) from the next undelivered index."""
        old_aid, old = live.attempt_id, dict(live.instances)
        avoid_main = live.role_of(suspect) == pdd.MD
        for role in ATTEMPT_ROLES:
            self._unload(live, role)
        if suspect is not None:
            live.excluded.add(suspect)
        try:
            if migrate:
                k = live.assembler.rewind()
                s = {**live.sampling, "max_new_tokens": live.max_tokens - k}
                live.offset = k
                pipeline = self._start_attempt(live, live.prompt + live.assembler.delivered[:k], s,
                                               prefer_relay=True)
                live.migrations += 1
                self.counters["migrations"] += 1
            else:
                live.assembler.rewind()
                pipeline = self._start_attempt(live, live.prompt, live.sampling, prefer_relay=avoid_main)
                live.retries += 1
                self.counters["retries"] += 1
        except (NoRouteError, Overloaded) as exc:
            self._end(live, None, f"{cause}; no instance left to take it over: {exc}", failed_at=suspect,
                      cancel=(old_aid, old))
            return
        if pdd.MD in old and pipeline is Pipeline.P_RLD:
            self.counters["fallbacks"] += 1
        live.info.setdefault("attempts", []).append({"cause": cause, "instances": old})
        for name in set(old.values()) - {suspect}:
            self._outbox.put(name, Cancel(old_aid, cause), None)
