"""A slow-headers client (slowloris) and a `placer serve` process for the tests of the servers' bounds."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

PARTIAL = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _open(port: int, source: str) -> socket.socket | None:
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(PARTIAL)
        return s
    except OSError:
        s.close()
        return None


class Slowloris:
    """Holds up to ``per_address`` connections from each of ``addresses`` loopback sources
    (127.0.0.2, …), each with an unfinished request, a byte of header every ``trickle_s``;
    a connection the server closes is opened again."""

    def __init__(self, port: int, addresses: int, per_address: int, trickle_s: float = 0.2) -> None:
        self.port, self.trickle_s = port, trickle_s
        self.sources = [f"127.0.0.{2 + i}" for i in range(addresses)]
        self.per_address = per_address
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        held: list[socket.socket] = []
        try:
            while not self.stop.is_set():
                for source in self.sources:
                    mine = sum(1 for s in held if s.getsockname()[0] == source)
                    for _ in range(self.per_address - mine):
                        if (s := _open(self.port, source)) is not None:
                            held.append(s)
                            self.opened += 1
                alive = []
                for s in held:
                    try:
                        s.send(b"X")
                        alive.append(s)
                    except OSError:
                        s.close()
                held = alive
                self.stop.wait(self.trickle_s)
        finally:
            for s in held:
                s.close()

    def __enter__(self) -> Slowloris:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)


def health_latencies(url: str, seconds: float, timeout_s: float) -> list[float]:
    """GET /healthz from 127.0.0.1 (a fresh connection each time) for ``seconds``; each one's
    latency (``timeout_s`` + 1 when it failed or timed out)."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            ok = httpx.get(f"{url}/healthz", timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            ok = False
        out.append(time.monotonic() - t0 if ok else timeout_s + 1)
        time.sleep(0.2)
    return out


def _limit_files(n: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


@contextmanager
def placer_serve(tmp_path, token: str, *, max_files: int | None = None, workers: int = 2) -> Iterator[tuple]:
    """`placer serve` in its own process on a fresh database (its open files capped at
    ``max_files``); yields (url, process, log path). Stopped (SIGKILL) at the end if still running."""
    port = free_port()
    env = {**os.environ, "PLACER_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}"}
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "placer.cli", "serve", "--port", str(port), "--token", token, "--no-scheduler",
             "--workers", str(workers)],
            env=env, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_limit_files(max_files) if max_files else None)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "placer serve did not come up"
                time.sleep(0.2)
        yield url, proc, log_path
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
