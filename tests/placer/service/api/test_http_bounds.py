"""The servers' HTTP bounds (issue 43): a slow client neither starves /healthz nor floods the log.

Real sockets against real servers: `placer serve` in its own process with its open files capped
(the attack of the issue ran it out of descriptors), and the bounded uvicorn in a thread for the
header deadline itself.
"""

from __future__ import annotations

import socket
import threading
import time

from placer.service.http import BoundedServer, HttpLimits, bounded_config
from tests.placer.service.api.slow_clients import PARTIAL, Slowloris, free_port, health_latencies, placer_serve
from tests.placer.service.api.support import make_settings

HEALTH_BOUND_S = 2.0  # what /healthz must answer within while the slow client attacks


def test_a_slow_headers_client_neither_starves_healthz_nor_floods_the_log(tmp_path):
    # 256 descriptors: the unbounded server ran out of them (accept: "Too many open files" tracebacks,
    # /healthz timing out); the bounded one caps connections at 128 and evicts the slowest
    with placer_serve(tmp_path, "slow-client-token", max_files=256) as (url, proc, log_path):
        with Slowloris(int(url.rsplit(":", 1)[1]), addresses=20, per_address=20) as attack:
            time.sleep(1.0)
            latencies = health_latencies(url, seconds=6.0, timeout_s=HEALTH_BOUND_S)
        assert attack.opened > 256  # the attack did open more connections than the process has descriptors
        assert max(latencies) <= HEALTH_BOUND_S, latencies
        assert proc.poll() is None
        log = log_path.read_bytes()
        assert len(log) < 100_000, f"{len(log)} bytes of log in 7 s"
        assert b"Too many open files" not in log and b"Traceback" not in log


def _serve_in_thread(app, limits: HttpLimits):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = BoundedServer(bounded_config(app, limits, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return server, thread, sock.getsockname()[1]


def test_headers_that_do_not_arrive_in_time_close_the_connection(tmp_path):
    from placer.service.api import create_app

    limits = HttpLimits(header_timeout_s=1.0, max_connections=16, max_per_client=4)
    server, thread, port = _serve_in_thread(create_app(make_settings(f"sqlite:///{tmp_path / 'a.db'}")), limits)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(PARTIAL)
        t0 = time.monotonic()
        for _ in range(20):  # a byte now and then does not extend the deadline
            try:
                s.send(b"X")
            except OSError:
                break
            time.sleep(0.1)
        s.settimeout(3)
        try:
            assert s.recv(100) == b""  # closed without an answer
        except ConnectionResetError:
            pass
        assert time.monotonic() - t0 < limits.header_timeout_s + 1.0
        s.close()
        extra = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(6)]  # cap per client: 4
        time.sleep(0.3)
        closed = 0
        for c in extra:
            c.settimeout(0.5)
            try:
                closed += c.recv(10) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass
            c.close()
        assert closed >= 2
        assert max(health_latencies(f"http://127.0.0.1:{port}", 0.5, HEALTH_BOUND_S)) <= HEALTH_BOUND_S
    finally:
        server.should_exit = True
        thread.join(20)
