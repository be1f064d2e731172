"""Admission control: a request is refused at once when the deployment cannot take it.

In: the router's view (live requests, per-instance load, which instances are up).
Out: nothing (admitted), `Overloaded` (HTTP 429 with Retry-After: every instance that
could serve it is at capacity — come back later), `NoCapacity` (HTTP 503: no
instance that could serve it is up at all), `TooLong` (HTTP 422: prompt plus output
budget beyond the model's context) or `TooLarge` (HTTP 413: more KV than one instance
holds, so no instance could ever serve it). A refusal is immediate — before any
prefill, never a request queued until it times out. No torch, no threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from executor.routing import NoRouteError


class NoCapacity(NoRouteError):
    """No instance able to serve the request is up (HTTP 503)."""


class TooLong(ValueError):
    """Prompt plus output budget beyond the model's context window (HTTP 422)."""


class TooLarge(ValueError):
    """The request needs more KV blocks than one instance holds: it could never run (HTTP 413)."""


class Overloaded(RuntimeError):
    """Every instance able to serve the request is full (HTTP 429)."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class AdmissionPolicy:
    """`max_live`: requests in flight in the whole deployment; `max_per_instance`: per instance;
    `max_context_tokens`: the model's context window (prompt + output budget).

    None disables a limit (the default: admission then only refuses with no capacity, and
    requests longer than one instance's KV pool — `check_size` — which is always on).
    """

    max_live: int | None = None
    max_per_instance: int | None = None
    retry_after_s: float = 1.0
    max_context_tokens: int | None = None

    def check_total(self, live: int) -> None:
        if self.max_live is not None and live >= self.max_live:
            raise Overloaded(f"{live} requests in flight (limit {self.max_live})", self.retry_after_s)

    def full(self, load: int) -> bool:
        return self.max_per_instance is not None and load >= self.max_per_instance

    def check_size(self, prompt_tokens: int, max_new_tokens: int, *, block_size: int,
                   num_blocks: int | None) -> None:
        """Refuse a request that can never run: `TooLong` past the context window, `TooLarge` when
        prompt + output budget need more KV blocks than one instance has (`num_blocks` None: unknown)."""
        total = prompt_tokens + max_new_tokens
        if self.max_context_tokens is not None and total > self.max_context_tokens:
            raise TooLong(f"prompt: {prompt_tokens} tokens + max_tokens {max_new_tokens} = {total} is beyond "
                          f"the model's context of {self.max_context_tokens} tokens")
        if num_blocks is not None and -(-total // block_size) > num_blocks:
            raise TooLarge(f"prompt: {prompt_tokens} tokens + max_tokens {max_new_tokens} need "
                           f"{-(-total // block_size)} KV blocks of {block_size} tokens; an instance holds "
                           f"{num_blocks} ({num_blocks * block_size} tokens)")
