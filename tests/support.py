"""Helpers shared by test packages."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def live_server(app) -> Iterator[str]:
    """Serve an ASGI ``app`` with a real uvicorn on a free loopback port in a thread; yields its URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


class LinearGrid:
    """A profile grid whose forward takes ``seconds`` per sequence or token, whatever the context."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def seconds_at(self, size, context):
        return self.seconds * size


class LinearTable:
    """A serve profile for the served-forwards tests: 0.1 s a prefill unit, 0.02 s a decode step unit."""

    prefill = LinearGrid(0.1)
    decode = LinearGrid(0.02)


def knapsack():
    """max 3a + 2.5b + c, a, b integer ≤ 4, c ≥ 0: 2a + b + c ≤ 7.5, a + 2b ≤ 6 (only optimum: 12.5 at 2, 2, 1.5)."""
    from placer.ilp.model import LinearModel

    m = LinearModel()
    a, b, c = m.var("a", 0, 4, integer=True), m.var("b", 0, 4, integer=True), m.var("c")
    m.add("r1", "r", {a: 2.0, b: 1.0, c: 1.0}, "<=", 7.5)
    m.add("r2", "r", {a: 1.0, b: 2.0}, "<=", 6.0)
    m.objective, m.maximize = {a: 3.0, b: 2.5, c: 1.0}, True
    return m
