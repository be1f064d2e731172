"""Admission control: a request is refused at once when the deployment cannot take it.

In: the router's view (live requests, per-instance load, which instances are up).
Out: nothing (admitted), `Overloaded` (HTTP 429 with Retry-After: every instance that
could serve it is at capacity — come back later), or `NoCapacity` (HTTP 503: no
instance that could serve it is up at all). A refusal is immediate — never a
request queued until it times out. No torch, no threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from executor.routing import NoRouteError


class NoCapacity(NoRouteError):
    """No instance able to serve the request is up (HTTP 503)."""


class Overloaded(RuntimeError):
    """Every instance able to serve the request is full (HTTP 429)."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class AdmissionPolicy:
    """`max_live`: requests in flight in the whole deployment; `max_per_instance`: per instance.

    None disables a limit (the default: admission then only refuses with no capacity).
    """

    max_live: int | None = None
    max_per_instance: int | None = None
    retry_after_s: float = 1.0

    def check_total(self, live: int) -> None:
        if self.max_live is not None and live >= self.max_live:
            raise Overloaded(f"{live} requests in flight (limit {self.max_live})", self.retry_after_s)

    def full(self, load: int) -> bool:
        return self.max_per_instance is not None and load >= self.max_per_instance
