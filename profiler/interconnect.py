"""Interconnect: host↔device pinned copies, device↔device and all-reduce bus bandwidth.

in:  torch, a device, its :class:`~placer.profiles.Rooflines`, quick or full
out: :class:`~placer.profiles.Measurement` records in bytes/s (one direction):

- GPU: ``h2d pinned`` and ``d2h pinned`` (pinned host buffer, device-side timing),
  against the host-link roofline (PCIe 5.0 x16, or NVLink-C2C on a Grace superchip);
- several GPUs: ``d2d cuda:i->cuda:j`` peer copies and an ``all-reduce`` bus
  bandwidth (NCCL through ``torch.cuda.nccl``; bus bytes = 2·(n-1)/n · size, as
  nccl-tests count them), against the scale-up roofline (datasheet NVLink-class
  bandwidth, one direction). The all-reduce figure is the chip's
  ``interconnect_efficiency`` numerator;
- CPU: a ``loopback socket`` (a socketpair between two threads: the kernel copies
  every byte twice through memory), against the memory-bandwidth bound.
"""

from __future__ import annotations

import socket
import threading
import time

from placer.profiles import Measurement, Rooflines
from profiler.measure import measurement
from profiler.timing import is_cuda, rates, time_runs

MIB = 1 << 20
HOST_COPY_BYTES = 256 * MIB
HOST_COPY_BYTES_QUICK = 64 * MIB
ALLREDUCE_BYTES = 256 * MIB
LOOPBACK_BYTES = 128 * MIB
LOOPBACK_BYTES_QUICK = 32 * MIB
LOOPBACK_CHUNK = 1 * MIB


def _host_copies(torch, device, roof, nbytes, reps):
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    out = []
    for name, fn in (("h2d pinned", lambda: dev.copy_(host, non_blocking=True)),
                     ("d2h pinned", lambda: host.copy_(dev, non_blocking=True))):
        seconds = time_runs(fn, device, warmup=2, reps=reps)
        out.append(measurement(dimension="interconnect", name=name, unit="bytes_per_s",
                               samples=rates(nbytes, seconds), roofline=roof.host_link_bytes_per_s,
                               roofline_source=f"{roof.source}: host link", params={"bytes": nbytes, "reps": reps}))
    return out


def _wall_time_all(torch, fn, devices, warmup, reps):
    """Wall-clock seconds of ``fn`` with every device synchronised (work spans devices)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        for d in devices:
            torch.cuda.synchronize(d)
        t0 = time.perf_counter()
        fn()
        for d in devices:
            torch.cuda.synchronize(d)
        out.append(time.perf_counter() - t0)
    return out


def _multi_gpu(torch, roof, reps, skipped):
    count = torch.cuda.device_count()
    devices = [torch.device("cuda", i) for i in range(count)]
    out = []
    src = torch.empty(ALLREDUCE_BYTES, dtype=torch.uint8, device=devices[0])
    for other in devices[1:]:
        dst = torch.empty(ALLREDUCE_BYTES, dtype=torch.uint8, device=other)
        seconds = _wall_time_all(torch, lambda d=dst: d.copy_(src, non_blocking=True), [devices[0], other], 2, reps)
        out.append(measurement(dimension="interconnect", name=f"d2d cuda:0->{other}", unit="bytes_per_s",
                               samples=rates(ALLREDUCE_BYTES, seconds), roofline=roof.scaleup_bytes_per_s,
                               roofline_source=f"{roof.source}: scale-up, one direction",
                               params={"bytes": ALLREDUCE_BYTES, "peer_access":
                                       torch.cuda.can_device_access_peer(0, other.index), "reps": reps}))
    try:
        from torch.cuda import nccl

        tensors = [torch.ones(ALLREDUCE_BYTES // 2, dtype=torch.bfloat16, device=d) for d in devices]
        seconds = _wall_time_all(torch, lambda: nccl.all_reduce(tensors), devices, 2, reps)
        bus = 2 * (count - 1) / count * ALLREDUCE_BYTES
        out.append(measurement(dimension="interconnect", name=f"all-reduce {count} GPUs", unit="bytes_per_s",
                               samples=rates(bus, seconds), roofline=roof.scaleup_bytes_per_s,
                               roofline_source=f"{roof.source}: scale-up, one direction",
                               params={"bytes": ALLREDUCE_BYTES, "gpus": count, "dtype": "bf16",
                                       "bus_factor": 2 * (count - 1) / count, "reps": reps}))
    except Exception as exc:  # NCCL missing or refusing: say so, keep the other figures
        skipped.append(f"interconnect all-reduce: {type(exc).__name__}: {str(exc)[:120]}")
    return out


def loopback_socket_seconds(nbytes: int, chunk: int = LOOPBACK_CHUNK) -> float:
    """Seconds to push ``nbytes`` through a local socketpair to a reading thread."""
    a, b = socket.socketpair()
    payload = memoryview(bytearray(chunk))
    sink = bytearray(chunk)
    got = [0]

    def reader():
        view = memoryview(sink)
        while got[0] < nbytes:
            n = b.recv_into(view)
            if not n:
                break
            got[0] += n

    try:
        thread = threading.Thread(target=reader, daemon=True)
        t0 = time.perf_counter()
        thread.start()
        sent = 0
        while sent < nbytes:
            sent += a.send(payload[: min(chunk, nbytes - sent)])
        thread.join()
        return time.perf_counter() - t0
    finally:
        a.close()
        b.close()


def measure(torch, device, roof: Rooflines, quick: bool = False, reps: int = 5) -> tuple[list[Measurement], list[str]]:
    """Host↔device and device↔device figures on a GPU; the loopback figure on the CPU."""
    skipped: list[str] = []
    if is_cuda(device):
        out = _host_copies(torch, device, roof, HOST_COPY_BYTES_QUICK if quick else HOST_COPY_BYTES, reps)
        if torch.cuda.device_count() > 1:
            out += _multi_gpu(torch, roof, reps, skipped)
        else:
            skipped.append("interconnect d2d / all-reduce: one GPU visible (interconnect_efficiency not measured)")
        return out, skipped
    nbytes = LOOPBACK_BYTES_QUICK if quick else LOOPBACK_BYTES
    loopback_socket_seconds(nbytes // 4)  # warm-up
    seconds = [loopback_socket_seconds(nbytes) for _ in range(reps)]
    skipped.append("interconnect: no accelerator links on the CPU; loopback socket only "
                   "(interconnect_efficiency not measured)")
    return [measurement(dimension="interconnect", name="loopback socket", unit="bytes_per_s",
                        samples=rates(nbytes, seconds), roofline=roof.mem_bw_bytes_per_s,
                        roofline_source=f"{roof.source}: memory bandwidth (a socket copies through memory)",
                        params={"bytes": nbytes, "chunk": LOOPBACK_CHUNK, "reps": reps})], skipped
