"""Socket channels: the in-datacenter path (direct TCP, the RDMA stand-in) and the WAN path.

In: messages for named peers, a `Directory` saying where each peer lives. Out: the
same `Transfer` interface as every channel; arrived messages go to the handler.

A peer in my datacenter is reached directly; a peer in another datacenter through
that pair's link emulator (`executor.transport.link`), which shapes the line. A peer
in my datacenter *and in this process* gets the message object handed over on the
I/O loop, no bytes copied (`local_fast_path`, the in-process stand-in for RDMA; the
same states and handler thread as the socket path). One
connection per peer carries all transfers to it, cut into chunks sent round-robin,
so a small message is not stuck behind a large one. The receiver reassembles each
transfer, acknowledges it (the sender's transfer becomes DONE) and hands the
message to the handler. A connection error fails the transfers on it; the next send
reconnects. A watchdog fails transfers past their deadline and stops sending them.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field

from executor.transport.base import (
    Handler,
    PeerInfo,
    Transfer,
    TransferState,
    TransportError,
)
from executor.transport.frames import FrameError, IoLoop, pack, read_frame
from executor.transport.messages import (
    Message,
    MessageError,
    decode,
    encode,
    encoded_size,
)

CHUNK_BYTES = 64 * 1024  # on a WAN line: small, so transfers share it finely
LOCAL_CHUNK_BYTES = 256 * 1024  # in a datacenter: fewer, larger frames
WAN_SEND_BUFFER_BYTES = 64 * 1024  # kernel send buffer toward a WAN line (see _connect)
WATCHDOG_S = 0.05


class Directory:
    """Who is where: peer name → `PeerInfo`; (src dc, dst dc) → link emulator address.

    Shared by the endpoints of one process; `update` replaces entries (a restarted
    instance re-registers under its name with a new address).
    """

    def __init__(self) -> None:
        self._peers: dict[str, PeerInfo] = {}
        self._links: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def add(self, peer: PeerInfo) -> None:
        with self._lock:
            self._peers[peer.name] = peer

    def remove(self, name: str) -> None:
        with self._lock:
            self._peers.pop(name, None)

    def add_link(self, src_dc: str, dst_dc: str, address: str) -> None:
        with self._lock:
            self._links[(src_dc, dst_dc)] = address

    def peer(self, name: str) -> PeerInfo:
        with self._lock:
            if name not in self._peers:
                raise TransportError(f"unknown peer {name!r}")
            return self._peers[name]

    def link(self, src_dc: str, dst_dc: str) -> str | None:
        with self._lock:
            return self._links.get((src_dc, dst_dc))

    def peers(self) -> list[PeerInfo]:
        with self._lock:
            return list(self._peers.values())

    def to_dict(self) -> dict:
        with self._lock:
            return {"peers": [vars(p) for p in self._peers.values()],
                    "links": [[a, b, addr] for (a, b), addr in self._links.items()]}

    def load(self, data: dict) -> None:
        for p in data.get("peers", []):
            self.add(PeerInfo(**p))
        for a, b, addr in data.get("links", []):
            self.add_link(a, b, addr)


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


@dataclass
class _Outgoing:
    transfer: Transfer
    data: bytes
    offset: int = 0


@dataclass
class _Conn:
    """One outgoing connection to a peer and the transfers queued on it."""

    peer: PeerInfo
    queue: deque[_Outgoing] = field(default_factory=deque)
    waiting_ack: dict[str, Transfer] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False


_IN_PROCESS: weakref.WeakValueDictionary[str, TcpEndpoint] = weakref.WeakValueDictionary()  # address → endpoint


class TcpEndpoint:
    """One instance's socket endpoint: a server for incoming messages, connections out."""

    _conn_ids = itertools.count()

    def __init__(self, name: str, datacenter: str, directory: Directory, host: str = "127.0.0.1",
                 port: int = 0, chunk_bytes: int = CHUNK_BYTES, local_chunk_bytes: int = LOCAL_CHUNK_BYTES,
                 local_fast_path: bool = True) -> None:
        self.name, self.datacenter, self.directory = name, datacenter, directory
        self.host, self.port, self.chunk_bytes, self.local_chunk_bytes = host, port, chunk_bytes, local_chunk_bytes
        self.local_fast_path = local_fast_path
        self.io = IoLoop.get()
        self.handler: Handler | None = None
        self.address: str | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conns: dict[str, _Conn] = {}
        self._watchdog: asyncio.Task | None = None
        self._closed = False
        self.received_bytes = 0

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self) -> str:
        """Listen; returns "host:port" (also kept in `address`)."""
        self.io.run(self._start())
        return self.address  # type: ignore[return-value]

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=1 << 22)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"{self.host}:{port}"
        _IN_PROCESS[self.address] = self
        self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.io.run(self._close(), timeout_s=5)
        except Exception:  # closing is best effort
            pass

    async def _close(self) -> None:
        if self._watchdog:
            self._watchdog.cancel()
        for conn in list(self._conns.values()):
            self._drop(conn, f"endpoint {self.name!r} closed")
        if self._server:
            self._server.close()

    def set_handler(self, handler: Handler) -> None:
        self.handler = handler

    # ---- sending -----------------------------------------------------------------------

    def send(self, dst: str, message: Message, *, deadline_s: float | None = None) -> Transfer:
        if self._closed:
            raise TransportError(f"endpoint {self.name!r} is closed")
        local = self._local_peer(dst)
        if local is not None:
            transfer = Transfer(self.name, dst, message, encoded_size(message), deadline_s)
            self.io.call(self._hand_over, local, transfer)
            return transfer
        data = encode(message)
        transfer = Transfer(self.name, dst, message, len(data), deadline_s)
        self.io.call(self._enqueue, dst, transfer, data)
        return transfer

    def _local_peer(self, dst: str) -> TcpEndpoint | None:
        if not self.local_fast_path:
            return None
        try:
            peer = self.directory.peer(dst)
        except TransportError:
            return None
        ep = _IN_PROCESS.get(peer.address or "")
        if ep is None or ep.name != dst or ep._closed or peer.datacenter != self.datacenter:
            return None
        return ep

    def _hand_over(self, ep: TcpEndpoint, transfer: Transfer) -> None:
        """The in-process path: the receiver's handler gets the (immutable) message object."""
        if transfer.poll() is TransferState.FAILED:
            return
        if ep._closed:
            transfer.fail(f"endpoint {ep.name!r} closed")
            return
        transfer.progress(transfer.bytes_total)
        ep.received_bytes += transfer.bytes_total
        if ep.handler is not None:
            ep.handler(self.name, transfer.message)
        transfer.done()

    def _enqueue(self, dst: str, transfer: Transfer, data: bytes) -> None:
        try:
            peer = self.directory.peer(dst)
        except TransportError as exc:
            transfer.fail(str(exc))
            return
        conn = self._conns.get(dst)
        if conn is None or conn.closed or conn.peer != peer:
            if conn is not None and not conn.closed:
                self._drop(conn, f"peer {dst!r} moved to {peer.address}")
            conn = _Conn(peer)
            self._conns[dst] = conn
            asyncio.get_running_loop().create_task(self._run_conn(conn))
        conn.queue.append(_Outgoing(transfer, data))
        conn.wake.set()

    async def _run_conn(self, conn: _Conn) -> None:
        try:
            reader, writer = await self._connect(conn.peer)
        except (OSError, TransportError) as exc:
            self._drop(conn, f"cannot connect to {conn.peer.name!r}: {exc}")
            return
        asyncio.get_running_loop().create_task(self._read_acks(conn, reader, writer))
        chunk = self.local_chunk_bytes if conn.peer.datacenter == self.datacenter else self.chunk_bytes
        try:
            while not conn.closed:
                if not conn.queue:
                    conn.wake.clear()
                    await conn.wake.wait()
                    continue
                out = conn.queue.popleft()
                t = out.transfer
                if t.poll() is TransferState.FAILED:
                    if out.offset:
                        writer.write(pack({"frame": "abort", "transfer": t.transfer_id, "error": t.error}))
                    continue
                end = min(out.offset + chunk, len(out.data))
                header = {"frame": "chunk", "transfer": t.transfer_id, "offset": out.offset, "total": len(out.data)}
                if out.offset == 0:
                    header["message"] = t.message_type
                writer.write(pack(header, memoryview(out.data)[out.offset:end]))
                t.progress(end - out.offset)
                out.offset = end
                if end < len(out.data):
                    conn.queue.append(out)
                else:
                    conn.waiting_ack[t.transfer_id] = t
                await writer.drain()
        except (OSError, ConnectionError) as exc:
            self._drop(conn, f"connection to {conn.peer.name!r} broke: {exc}")
        finally:
            writer.close()

    async def _connect(self, peer: PeerInfo) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if peer.address is None:
            raise TransportError(f"peer {peer.name!r} has no address")
        hello = {"frame": "hello", "src": self.name, "src_dc": self.datacenter, "dst": peer.name,
                 "dst_dc": peer.datacenter, "dst_addr": peer.address}
        target = peer.address
        if peer.datacenter != self.datacenter:
            target = self.directory.link(self.datacenter, peer.datacenter)
            if target is None:
                raise TransportError(f"no link from {self.datacenter!r} to {peer.datacenter!r}")
        host, port = split_address(target)
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        if peer.datacenter != self.datacenter:
            # What waits for the line waits here, in the round-robin over transfers (_run_conn), not in
            # megabytes of kernel FIFO where a small order or a new transfer queues behind older KV
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, WAN_SEND_BUFFER_BYTES)
        writer.write(pack(hello))
        return reader, writer

    async def _read_acks(self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header, _, _ = await read_frame(reader)
                t = conn.waiting_ack.pop(header.get("transfer", ""), None)
                if t is None:
                    continue
                if header["frame"] == "ack":
                    t.done()
                elif header["frame"] == "nack":
                    t.fail(f"receiver refused the message: {header.get('error')}")
        except (asyncio.IncompleteReadError, OSError, ConnectionError, FrameError) as exc:
            self._drop(conn, f"connection to {conn.peer.name!r} closed: {exc!r}")

    def _drop(self, conn: _Conn, error: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        conn.wake.set()
        for out in conn.queue:
            out.transfer.fail(error)
        for t in conn.waiting_ack.values():
            t.fail(error)
        conn.queue.clear()
        conn.waiting_ack.clear()
        if self._conns.get(conn.peer.name) is conn:
            del self._conns[conn.peer.name]

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCHDOG_S)
            for conn in list(self._conns.values()):
                for tid, t in list(conn.waiting_ack.items()):
                    if t.poll() is TransferState.FAILED:
                        conn.waiting_ack.pop(tid, None)
                if any(out.transfer.poll() is TransferState.FAILED for out in conn.queue):
                    conn.wake.set()

    # ---- receiving ---------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buffers: dict[str, tuple[bytearray, list[int]]] = {}
        src = "?"
        try:
            while True:
                header, body, _ = await read_frame(reader)
                kind = header["frame"]
                if kind == "hello":
                    src = header.get("src", "?")
                elif kind == "chunk":
                    tid, total, offset = header["transfer"], int(header["total"]), int(header["offset"])
                    if tid not in buffers:
                        buffers[tid] = (bytearray(total), [0])
                    buf, got = buffers[tid]
                    buf[offset : offset + len(body)] = body
                    got[0] += len(body)
                    self.received_bytes += len(body)
                    if got[0] >= total:
                        del buffers[tid]
                        self._deliver(src, tid, buf, writer)
                elif kind == "abort":
                    buffers.pop(header.get("transfer", ""), None)
        except (asyncio.IncompleteReadError, OSError, ConnectionError, FrameError):
            pass
        finally:
            writer.close()

    def _deliver(self, src: str, tid: str, data: bytearray, writer: asyncio.StreamWriter) -> None:
        try:
            msg = decode(data)
        except MessageError as exc:
            writer.write(pack({"frame": "nack", "transfer": tid, "error": str(exc)}))
            return
        writer.write(pack({"frame": "ack", "transfer": tid, "at": time.time()}))
        if self.handler is not None:
            self.handler(src, msg)
