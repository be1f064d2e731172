"""The WAN line between two datacenters, emulated as a TCP relay that shapes what crosses it.

In: connections from endpoints in one datacenter to peers in the other (their first
frame names the destination). Out: the same frames at the destination, paced and
delayed as the line would (`LinkShape`): every transfer crossing in one direction
shares that direction's serialiser (`LineClock`: fair round-robin between transfers,
frames back to back at the line's rate on the line's own timeline, so the relay's
wake-up lateness costs no capacity), then each frame arrives one-way delay + jitter
after its last byte crossed, never overtaking an earlier frame of its connection;
acknowledgements flow back with the one-way delay. Real TCP sockets
on both sides, so the same code shapes a line between processes or machines.

The line's backlog waits where the round-robin sees it: the relay reads ahead of each
sender `READ_AHEAD_S` of line time (a busy process's I/O thread, late to refill a short
read-ahead, left a 200 Mbit/s line idle 10-20 % of the time while KV was waiting), and
the buffers before it are small (`UPSTREAM_BUFFER_BYTES` here, the sender's
`WAN_SEND_BUFFER_BYTES`), so a new transfer or a small order does not queue behind
megabytes of older KV in a kernel FIFO.

Counters (`stats()`): bytes and frames per direction, the line's queueing (`bucket_wait_s`:
seconds frames waited for the line, summed).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from executor.transport.frames import FrameError, IoLoop, pack, read_frame
from executor.transport.shaping import LineClock, LinkShape
from executor.transport.tcp import CHUNK_BYTES, split_address

READ_AHEAD_S = 0.25  # line time the relay reads ahead of each sender (the line's queue, round-robin visible)
MIN_READ_AHEAD_BYTES = 16 * CHUNK_BYTES
MAX_READ_AHEAD_BYTES = 64 << 20
UPSTREAM_BUFFER_BYTES = 64 * 1024  # kernel + reader buffer between a sender and the relay: kept small


@dataclass
class _Relay:
    """One connection through the line: upstream (sender side) and downstream (receiver side)."""

    conn_id: int
    direction: tuple[str, str]
    down_writer: asyncio.StreamWriter
    up_writer: asyncio.StreamWriter
    queued_bytes: int = 0
    space: asyncio.Event = field(default_factory=asyncio.Event)
    delay_line: asyncio.Queue = field(default_factory=asyncio.Queue)
    last_release: float = 0.0
    ack_last_release: float = 0.0


@dataclass
class _Direction:
    """One direction of the line: its serialiser and the flows waiting for it."""

    line: LineClock
    flows: OrderedDict = field(default_factory=OrderedDict)  # (conn_id, transfer) → deque of (ready at, frame)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    bytes_sent: int = 0
    bytes_resent: int = 0
    frames: int = 0
    wait_s: float = 0.0


class LinkEmulator:
    """A shaped line between datacenters `dc_a` and `dc_b` (both directions, each at full rate)."""

    _ids = itertools.count()

    def __init__(self, dc_a: str, dc_b: str, shape: LinkShape, host: str = "127.0.0.1", port: int = 0,
                 seed: int = 0) -> None:
        self.dc_a, self.dc_b, self.shape = dc_a, dc_b, shape
        self.host, self.port = host, port
        self.rng = random.Random(seed)
        self.io = IoLoop.get()
        self.address: str | None = None
        self._server: asyncio.base_events.Server | None = None
        self._dirs: dict[tuple[str, str], _Direction] = {}
        self._tasks: list[asyncio.Task] = []
        # The line's backlog waits in the relay's per-transfer queues, where the round-robin sees it:
        # READ_AHEAD_S of line time per connection, so an I/O thread held up by a busy process (the
        # GIL, other threads) for less than that never leaves the line idle while a sender has bytes
        # (64 KiB read-ahead at 200 Mbit/s, ~20 ms, idled it 10-20 % of the time in bench_serve).
        self.read_ahead = int(min(max(shape.bytes_per_s * READ_AHEAD_S, MIN_READ_AHEAD_BYTES), MAX_READ_AHEAD_BYTES))

    def start(self) -> str:
        self.io.run(self._start())
        return self.address  # type: ignore[return-value]

    async def _start(self) -> None:
        now = time.monotonic()
        loop = asyncio.get_running_loop()
        for d in ((self.dc_a, self.dc_b), (self.dc_b, self.dc_a)):
            self._dirs[d] = _Direction(LineClock(self.shape.bytes_per_s, now))
            self._tasks.append(loop.create_task(self._pace(self._dirs[d])))
        # Small buffers before the relay: bytes a sender has written beyond its read-ahead wait in its
        # own round-robin (executor.transport.tcp), not in a kernel FIFO of megabytes that a new transfer
        # queues behind (Linux autotunes a loopback receive buffer up to tcp_rmem's 32 MiB)
        self._server = await asyncio.start_server(self._accept, self.host, self.port, limit=UPSTREAM_BUFFER_BYTES)
        for sock in self._server.sockets:  # accepted connections inherit it
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UPSTREAM_BUFFER_BYTES)
        self.address = f"{self.host}:{self._server.sockets[0].getsockname()[1]}"

    def close(self) -> None:
        try:
            self.io.run(self._close(), timeout_s=5)
        except Exception:
            pass

    async def _close(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._server:
            self._server.close()

    def stats(self) -> dict[str, dict[str, float]]:
        return {f"{a}->{b}": {"bytes": d.bytes_sent, "bytes_resent": d.bytes_resent, "frames": d.frames,
                              "bucket_wait_s": round(d.wait_s, 3)}
                for (a, b), d in self._dirs.items()}

    # ---- a connection through the line -------------------------------------------------

    async def _accept(self, up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
        try:
            hello, _, _ = await read_frame(up_reader)
            direction = (hello.get("src_dc"), hello.get("dst_dc"))
            if hello.get("frame") != "hello" or direction not in self._dirs:
                raise FrameError(f"link {self.dc_a}<->{self.dc_b} cannot carry {direction}")
            host, port = split_address(hello["dst_addr"])
            down_reader, down_writer = await asyncio.open_connection(host, port, limit=1 << 22)
        except (asyncio.IncompleteReadError, OSError, FrameError, KeyError, ValueError):
            up_writer.close()
            return
        relay = _Relay(next(self._ids), direction, down_writer, up_writer)
        relay.space.set()
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self._deliver(relay)), loop.create_task(self._acks_back(relay, down_reader))]
        self._tasks.extend(tasks)
        self._enqueue(relay, "hello", pack(hello))
        try:
            while True:
                await relay.space.wait()
                header, body, _ = await read_frame(up_reader)
                self._enqueue(relay, header.get("transfer", "ctl"), pack(header, body))
        except (asyncio.IncompleteReadError, OSError, ConnectionError, FrameError):
            pass
        finally:
            await asyncio.sleep(self.shape.one_way_s + 0.5)  # let queued frames drain, then close
            for t in tasks:
                t.cancel()
            self._tasks = [t for t in self._tasks if not t.done()]
            down_writer.close()
            up_writer.close()

    def _enqueue(self, relay: _Relay, flow: str, frame: bytes) -> None:
        d = self._dirs[relay.direction]
        d.flows.setdefault((relay.conn_id, flow), (relay, deque()))[1].append((time.monotonic(), frame))
        relay.queued_bytes += len(frame)
        if relay.queued_bytes >= self.read_ahead:
            relay.space.clear()
        d.wake.set()

    async def _pace(self, d: _Direction) -> None:
        """Round-robin over the transfers waiting on this direction, one frame each time the line is
        free; schedule each frame's arrival from the line's own timeline."""
        while True:
            if not d.flows:
                d.wake.clear()
                await d.wake.wait()
                continue
            wait = d.line.free_at - time.monotonic()
            if wait > 0:  # the line is still sending the previous frame
                await asyncio.sleep(wait)
                continue  # another transfer may have joined the round meanwhile
            key, (relay, frames) = next(iter(d.flows.items()))
            ready_at, frame = frames.popleft()
            del d.flows[key]
            if frames:
                d.flows[key] = (relay, frames)  # back of the round
            relay.queued_bytes -= len(frame)
            if relay.queued_bytes < self.read_ahead:
                relay.space.set()
            start, end = d.line.send(len(frame), ready_at)
            d.wait_s += start - ready_at
            delay, resent = self.shape.arrival_delay_s(len(frame), self.rng)
            if resent:  # the resent bytes take the line too (after this frame)
                d.line.send(resent, end)
                d.bytes_resent += resent
            release = max(end + delay, relay.last_release)
            relay.last_release = release
            d.bytes_sent += len(frame)
            d.frames += 1
            relay.delay_line.put_nowait((release, frame))

    async def _deliver(self, relay: _Relay) -> None:
        try:
            while True:
                release, frame = await relay.delay_line.get()
                wait = release - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                relay.down_writer.write(frame)
                await relay.down_writer.drain()
        except (OSError, ConnectionError):
            relay.up_writer.close()

    async def _acks_back(self, relay: _Relay, down_reader: asyncio.StreamReader) -> None:
        """Acknowledgements from the receiver travel back with the one-way delay (no bucket)."""
        pending: asyncio.Queue = asyncio.Queue()

        async def forward() -> None:
            while True:
                release, frame = await pending.get()
                wait = release - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                relay.up_writer.write(frame)

        task = asyncio.get_running_loop().create_task(forward())
        self._tasks.append(task)
        try:
            while True:
                header, body, _ = await read_frame(down_reader)
                delay, _ = self.shape.arrival_delay_s(0, self.rng)
                release = max(time.monotonic() + delay, relay.ack_last_release)
                relay.ack_last_release = release
                pending.put_nowait((release, pack(header, body)))
        except (asyncio.IncompleteReadError, OSError, ConnectionError, FrameError):
            await asyncio.sleep(self.shape.one_way_s + 0.1)
            relay.up_writer.close()
        finally:
            task.cancel()
