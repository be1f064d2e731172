"""WAN link probe: TCP bandwidth over parallel streams and round-trip time.

in:  a server (``serve``: ``placer profile link --listen PORT``) and a client
     (``probe``: ``--peer HOST:PORT``), any two hosts that can open TCP to each other
out: a dict in the :class:`placer.profiles.records.LinkProfile` schema: aggregate and per-stream
     Gbit/s measured at the *receiver* (bytes between its first and last byte of all
     streams), RTT median and jitter (p90 - p10) of small ping-pong messages.

Protocol (one JSON header line per connection, then raw bytes):

- ``{"op": "ping"}``: the server echoes fixed 64-byte messages until EOF;
- ``{"op": "sink"}``: the server reads until EOF, then answers one JSON line
  ``{"bytes", "first_s", "last_s"}`` (its own monotonic clock, shared by all streams).

Shaping: ``rate_bytes_per_s`` makes the client's senders share one token bucket
(:class:`SharedPacer`, over the executor's), so the path behaves like a line of that
rate (how the tests check a known 200 Mbit/s within 10 %); unshaped, they send as fast
as TCP lets them. Standard library only, besides the executor's pure-arithmetic
bucket and the record's schema version.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable

from executor.transport.shaping import TokenBucket
from placer.profiles import SCHEMA_VERSION

PING_BYTES = 64
CHUNK_BYTES = 256 * 1024
HEADER_MAX = 4096


class SharedPacer:
    """Paces several sender threads to one rate: ``take(n)`` blocks until n bytes are due.

    One :class:`executor.transport.shaping.TokenBucket` (the emulated WAN line's)
    behind a lock, on the monotonic clock: reservations go negative and the debt is
    slept off outside the lock, so the long-run rate is exactly ``rate_bytes_per_s``
    whatever the number of threads. It starts empty (the first bytes are paced too)
    and holds at most ``burst_bytes`` of unused credit.
    """

    def __init__(self, rate_bytes_per_s: float, burst_bytes: float):
        if rate_bytes_per_s <= 0 or burst_bytes <= 0:
            raise ValueError(f"rate_bytes_per_s={rate_bytes_per_s} and burst_bytes={burst_bytes} must be > 0")
        now = time.monotonic()
        self._bucket = TokenBucket(rate_bytes_per_s, burst_bytes, now)
        self._bucket.reserve(burst_bytes, now)  # spend the initial burst: start empty
        self._lock = threading.Lock()

    def take(self, n: int) -> None:
        with self._lock:
            wait = self._bucket.reserve(n, time.monotonic())
        if wait > 0:
            time.sleep(wait)


def _recv_line(sock: socket.socket) -> bytes:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        part = sock.recv(1)
        if not part:
            break
        buf += part
        if len(buf) > HEADER_MAX:
            raise ValueError("header line too long")
    return bytes(buf)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            raise ConnectionError("peer closed the connection")
        buf += part
    return bytes(buf)


def _handle(conn: socket.socket, log: Callable[[str], None] | None) -> None:
    with conn:
        try:
            header = json.loads(_recv_line(conn) or b"{}")
        except (ValueError, OSError):
            return
        op = header.get("op")
        if op == "ping":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                while True:
                    conn.sendall(_recv_exact(conn, PING_BYTES))
            except (ConnectionError, OSError):
                return
        if op == "sink":
            view = memoryview(bytearray(CHUNK_BYTES))
            total, first, last = 0, None, None
            while True:
                n = conn.recv_into(view)
                if not n:
                    break
                last = time.monotonic()
                first = first if first is not None else last
                total += n
            reply = {"bytes": total, "first_s": first or 0.0, "last_s": last or 0.0}
            conn.sendall((json.dumps(reply) + "\n").encode())
            if log and first is not None and last > first:
                log(f"stream: {total / 1e6:.1f} MB at {total * 8 / (last - first) / 1e9:.3f} Gbit/s")


def serve(port: int, host: str = "0.0.0.0", stop: threading.Event | None = None,
          on_ready: Callable[[str, int], None] | None = None, log: Callable[[str], None] | None = None) -> None:
    """Answer probes on ``host:port`` until ``stop`` is set (or forever); port 0 picks one."""
    with socket.create_server((host, port), reuse_port=False, backlog=64) as server:
        server.settimeout(0.2)
        bound_host, bound_port = server.getsockname()[:2]
        if on_ready:
            on_ready(bound_host, bound_port)
        while stop is None or not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            threading.Thread(target=_handle, args=(conn, log), daemon=True).start()


def parse_peer(peer: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) → (host, port); ValueError naming the value."""
    host, sep, port = peer.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--peer must be HOST:PORT, got {peer!r}")
    return host.strip("[]"), int(port)


def _connect(host: str, port: int, op: str, timeout_s: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout_s)
    sock.sendall((json.dumps({"op": op}) + "\n").encode())
    return sock


def measure_rtt(host: str, port: int, count: int = 20, timeout_s: float = 10.0) -> list[float]:
    """Round-trip seconds of ``count`` 64-byte ping-pongs (after two warm-ups)."""
    with _connect(host, port, "ping", timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        msg = b"p" * PING_BYTES
        out = []
        for i in range(count + 2):
            t0 = time.perf_counter()
            sock.sendall(msg)
            _recv_exact(sock, PING_BYTES)
            if i >= 2:
                out.append(time.perf_counter() - t0)
        return out


def measure_bandwidth(host: str, port: int, streams: int = 4, seconds: float = 5.0,
                      rate_bytes_per_s: float | None = None,
                      on_progress: Callable[[float], None] | None = None) -> tuple[int, list[float], float]:
    """(bytes, per-stream bytes/s, aggregate bytes/s) of ``streams`` parallel senders."""
    if streams < 1 or seconds <= 0:
        raise ValueError(f"streams={streams} must be >= 1 and seconds={seconds} > 0")
    chunk = CHUNK_BYTES
    bucket = None
    if rate_bytes_per_s:
        chunk = int(max(1024, min(CHUNK_BYTES, rate_bytes_per_s / 200)))  # >= 200 sends a second
        bucket = SharedPacer(rate_bytes_per_s, burst_bytes=chunk * streams)
    socks = [_connect(host, port, "sink", seconds + 30) for _ in range(streams)]
    results: list[dict | None] = [None] * streams
    errors: list[BaseException] = []
    start = threading.Barrier(streams + 1)
    payload = memoryview(b"\0" * chunk)

    def sender(i: int) -> None:
        sock = socks[i]
        try:
            start.wait()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                if bucket:
                    bucket.take(chunk)
                sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            results[i] = json.loads(_recv_line(sock))
        except BaseException as exc:  # reported to the caller below
            errors.append(exc)
        finally:
            sock.close()

    threads = [threading.Thread(target=sender, args=(i,), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in threads:
        while t.is_alive():
            t.join(0.1)
            if on_progress:
                on_progress(min(1.0, (time.monotonic() - t0) / seconds))
    if errors:
        raise ConnectionError(f"link probe: a stream failed: {type(errors[0]).__name__}: {errors[0]}")
    total = sum(r["bytes"] for r in results)
    per_stream = [r["bytes"] / (r["last_s"] - r["first_s"]) if r["last_s"] > r["first_s"] else 0.0 for r in results]
    span = max(r["last_s"] for r in results) - min(r["first_s"] for r in results if r["bytes"])
    return total, per_stream, (total / span if span > 0 else 0.0)


def probe(peer: str, streams: int = 4, seconds: float = 5.0, rate_gbit_per_s: float | None = None,
          rtt_count: int = 20, on_progress: Callable[[float], None] | None = None) -> dict:
    """Probe the path to ``peer`` (HOST:PORT); a dict in the LinkProfile schema."""
    host, port = parse_peer(peer)
    rtts = measure_rtt(host, port, rtt_count)
    rate = rate_gbit_per_s * 1e9 / 8 if rate_gbit_per_s else None
    total, per_stream, aggregate = measure_bandwidth(host, port, streams, seconds, rate, on_progress)
    rtt_ms = [r * 1e3 for r in rtts]
    deciles = statistics.quantiles(rtt_ms, n=10) if len(rtt_ms) > 1 else [rtt_ms[0]] * 9
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "link",
        "peer": peer,
        "host": socket.gethostname(),
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "streams": streams,
        "seconds": seconds,
        "shaped_gbit_per_s": rate_gbit_per_s,
        "bytes": total,
        "link_gbit_per_s": aggregate * 8 / 1e9,
        "per_stream_gbit_per_s": [s * 8 / 1e9 for s in per_stream],
        "rtt_ms": statistics.median(rtt_ms),
        "jitter_ms": deciles[-1] - deciles[0],
        "rtt_samples_ms": rtt_ms,
        "python_version": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TCP link probe (server with --listen, client with --peer).")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--listen", type=int, metavar="PORT")
    group.add_argument("--peer", metavar="HOST:PORT")
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--shape-gbit", type=float, default=None)
    args = parser.parse_args(argv)
    if args.listen is not None:
        try:
            serve(args.listen, args.bind, on_ready=lambda h, p: print(f"listening on {h}:{p}", flush=True),
                  log=lambda line: print(line, flush=True))
        except KeyboardInterrupt:
            pass
        return 0
    print(json.dumps(probe(args.peer, args.streams, args.seconds, args.shape_gbit), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
