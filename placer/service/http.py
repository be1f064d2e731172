"""The HTTP bounds of both servers (``placer serve`` and the executor ``placer deploy`` starts).

uvicorn alone waits forever for a request's headers and accepts connections until the process
runs out of file descriptors; one slow client (a byte of header now and then, on many sockets)
then starved ``/healthz`` and asyncio logged a "Too many open files" traceback on every accept
(194 MB in 40 s). :func:`serve` runs uvicorn with:

- a header deadline (:attr:`HttpLimits.header_timeout_s`): a request's line and headers must be
  complete this long after the connection opened (or after the previous response on a kept-alive
  connection), else the connection is closed;
- a connection cap (:attr:`HttpLimits.max_connections`, at most half the descriptors the process
  may open; a listen backlog of at most an eighth, since asyncio accepts a backlog's worth before
  any cap runs) and a cap per client address (:attr:`HttpLimits.max_per_client`): a connection over the
  client's cap is closed at once; one over the total cap evicts the connection that has waited
  longest for its headers, of the client holding the most (a client that sends its request
  promptly gets in while one slow client holds many), or is closed;
- uvicorn's own bounds: headers over :attr:`HttpLimits.max_header_bytes` → 400 (h11), idle
  keep-alive connections closed after :attr:`HttpLimits.keep_alive_s`, handler tasks over
  ``limit_concurrency`` → 503, and at SIGTERM requests still running are cancelled after
  :attr:`HttpLimits.graceful_shutdown_s`;
- logs that cannot flood: a message repeated more than :attr:`HttpLimits.log_burst` times in
  :attr:`HttpLimits.log_window_s` (an accept error, "Invalid HTTP request") is dropped and
  counted, and the count is logged once the window has passed.

uvicorn is imported here, so this module belongs to the service layer; the executor imports it
where it starts its server.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass, field
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)
#: The loggers whose repeats are bounded (uvicorn's errors and warnings, asyncio's accept errors).
NOISY_LOGGERS = ("uvicorn.error", "asyncio", __name__)


def _descriptors() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 8192


@dataclass(frozen=True)
class HttpLimits:
    """The bounds of one server (docs/security.md lists them with their reasons)."""

    header_timeout_s: float = 10.0
    keep_alive_s: int = 5
    max_connections: int = field(default_factory=lambda: max(32, min(1000, _descriptors() // 2)))
    #: the listen backlog, and so how many connections asyncio accepts in one go before any cap runs
    backlog: int = field(default_factory=lambda: max(16, min(128, _descriptors() // 8)))
    max_per_client: int = 64
    max_header_bytes: int = 16 * 1024
    graceful_shutdown_s: int = 10
    log_window_s: float = 60.0
    log_burst: int = 5


class RepeatFilter(logging.Filter):
    """Lets a message (its template) through ``burst`` times per ``window_s``; counts the rest and
    says how many were dropped when the next window opens."""

    def __init__(self, window_s: float, burst: int) -> None:
        super().__init__()
        self.window_s, self.burst = window_s, burst
        self._seen: dict[tuple[str, str], list[float]] = {}  # key → [window start, count]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg)[:200])
        now = time.monotonic()
        start, count = self._seen.get(key, (now, 0))
        if now - start >= self.window_s:
            dropped = count - self.burst
            if dropped > 0:
                record.msg = f"{record.msg} [{dropped} more like this in the previous {self.window_s:g} s not logged]"
            start, count = now, 0
        self._seen[key] = [start, count + 1]
        if len(self._seen) > 1000:  # many distinct messages: forget the oldest windows
            for old in sorted(self._seen, key=lambda k: self._seen[k][0])[:500]:
                del self._seen[old]
        return count < self.burst


def install_repeat_filter(limits: HttpLimits) -> None:
    """Add one :class:`RepeatFilter` to each noisy logger (idempotent)."""
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter(limits.log_window_s, limits.log_burst))


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and connection caps (:class:`HttpLimits`)."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.limits: HttpLimits = getattr(config, "http_limits", None) or HttpLimits()
        self.header_timer: asyncio.TimerHandle | None = None
        self.waiting_since: float | None = None  # when it began waiting for a request's headers

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else None
        same = sum(1 for c in self.connections if c is not self and c.client and c.client[0] == peer)
        if peer is not None and same >= self.limits.max_per_client:
            log.warning("connection from %s refused: it holds %d (the cap per client)", peer, same)
            transport.abort()
            return
        if len(self.connections) > self.limits.max_connections and not self._evict_slowest():
            log.warning("connection refused: %d open (the cap)", len(self.connections) - 1)
            transport.abort()
            return
        self._arm_header_timer()

    def _evict_slowest(self) -> bool:
        """Close the connection that has waited longest for its headers, of the client holding the
        most such connections (a prompt client with one connection is not the victim of a slow one
        with many); whether there was one."""
        by_client: dict[Any, list[BoundedH11Protocol]] = {}
        for c in self.connections:
            if c is not self and getattr(c, "waiting_since", None) is not None:
                by_client.setdefault(c.client[0] if c.client else None, []).append(c)
        if not by_client:
            return False
        group = max(by_client.values(), key=lambda g: (len(g), -min(c.waiting_since for c in g)))
        min(group, key=lambda c: c.waiting_since).header_timeout("evicted: the connection cap is reached")
        return True

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self.waiting_since = time.monotonic()
        self.header_timer = self.loop.call_later(self.limits.header_timeout_s, self.header_timeout)

    def _disarm_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
        self.header_timer, self.waiting_since = None, None

    def header_timeout(self, why: str = "") -> None:
        """The headers did not arrive in time (or room was needed): close without an answer."""
        self._disarm_header_timer()
        if not self.transport.is_closing():
            log.warning("closed a connection from %s waiting for its request headers: %s",
                        self.client[0] if self.client else "?",
                        why or f"none within {self.limits.header_timeout_s:g} s")
            self.transport.abort()

    def handle_events(self) -> None:
        super().handle_events()
        if self.header_timer is not None and self.conn.their_state is not h11.IDLE:
            self._disarm_header_timer()  # the request line and headers are in

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # the next request on this connection has the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)


class BoundedServer(uvicorn.Server):
    """uvicorn's server with asyncio's exception handler bounded (accept errors are not a traceback
    per try) and the repeat filter on its loggers."""

    async def startup(self, sockets: list | None = None) -> None:
        limits: HttpLimits = getattr(self.config, "http_limits", None) or HttpLimits()
        install_repeat_filter(limits)
        loop = asyncio.get_running_loop()

        def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if context.get("message", "").startswith("socket.accept() out of system resource"):
                log.error("socket.accept() out of system resource: %s", exc)  # one line, no traceback
                return
            loop.default_exception_handler(context)

        loop.set_exception_handler(handler)
        await super().startup(sockets=sockets)


def bounded_config(app: Any, limits: HttpLimits | None = None, **options: Any) -> uvicorn.Config:
    """A uvicorn config for ``app`` under ``limits`` (``options``: host, port, log_level, …)."""
    limits = limits or HttpLimits()
    config = uvicorn.Config(
        app, http=BoundedH11Protocol, timeout_keep_alive=limits.keep_alive_s,
        # uvicorn counts open connections in this too: above our own cap (and a batch of accepts not
        # yet evicted), it bounds the handler tasks (a task can outlive its connection)
        limit_concurrency=2 * limits.max_connections + limits.backlog, backlog=limits.backlog,
        h11_max_incomplete_event_size=limits.max_header_bytes,
        timeout_graceful_shutdown=limits.graceful_shutdown_s, **options)
    config.http_limits = limits  # read by BoundedH11Protocol and BoundedServer
    return config


def serve(app: Any, host: str, port: int, *, log_level: str = "info", limits: HttpLimits | None = None,
          **options: Any) -> None:
    """Run ``app`` until SIGINT/SIGTERM under :class:`HttpLimits` (replaces ``uvicorn.run``)."""
    BoundedServer(bounded_config(app, limits, host=host, port=port, log_level=log_level, **options)).run()
