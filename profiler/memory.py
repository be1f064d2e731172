"""Memory: device bandwidth (copy and triad, torch and Triton) and usable capacity.

in:  torch, a device, its :class:`~placer.profiles.Rooflines`, quick or full
out: :class:`~placer.profiles.Measurement` records: bytes/s counting every byte read
     and written (copy 2·n·elem, triad 3·n·elem), buffers far larger than the last
     cache level; and the usable capacity in bytes.

Bandwidth: ``torch`` copy (``dst.copy_(src)``) and triad (``torch.add(b, c,
alpha=s, out=a)``) everywhere; on a GPU also the Triton kernels of
:mod:`profiler.triton_copy` in a few block/warp variants (best reported).

Capacity: on a GPU, plain allocations (cudaMalloc through the caching allocator) in
1 GiB chunks until one fails, then smaller chunks down to 16 MiB, all freed again;
``torch.cuda.mem_get_info`` is recorded beside it. On the CPU, allocating until
failure would summon the OOM killer rather than fail, so chunks are allocated *and
touched* only up to a cap (1 GiB with ``quick``; else 8 GiB or half of what is
available, whichever is less): the figure is then a lower bound and says so.
"""

from __future__ import annotations

from pathlib import Path

from placer.profiles import Measurement, Rooflines
from profiler.measure import measurement
from profiler.rooflines import GIB
from profiler.timing import auto_inner, is_cuda, rates, time_runs

MIB = 1 << 20
GPU_BUFFER_BYTES = 1 * GIB
CPU_BUFFER_BYTES = 256 * MIB
CPU_BUFFER_BYTES_QUICK = 128 * MIB
TARGET_S = 0.02
CPU_CAPACITY_CAP_QUICK = 1 * GIB
CPU_CAPACITY_CAP = 8 * GIB


def _bandwidth(name, nbytes_moved, fn, device, roof, params, reps):
    inner = auto_inner(fn, device, TARGET_S)
    seconds = time_runs(fn, device, warmup=1, reps=reps, inner=inner)
    return measurement(dimension="memory_bandwidth", name=name, unit="bytes_per_s",
                       samples=rates(nbytes_moved, seconds), roofline=roof.mem_bw_bytes_per_s,
                       roofline_source=f"{roof.source}: memory bandwidth",
                       params={**params, "inner": inner, "reps": reps})


def measure_bandwidth(torch, device, roof: Rooflines, quick: bool = False,
                      reps: int = 5) -> tuple[list[Measurement], list[str]]:
    """Copy and triad bandwidth with torch (and Triton on a GPU)."""
    gpu = is_cuda(device)
    buffer_bytes = GPU_BUFFER_BYTES if gpu else (CPU_BUFFER_BYTES_QUICK if quick else CPU_BUFFER_BYTES)
    try:
        return _bandwidths(torch, device, roof, buffer_bytes, reps)
    finally:  # the buffers are gone with the helper's frame
        if gpu:
            torch.cuda.empty_cache()


def _bandwidths(torch, device, roof, buffer_bytes, reps):
    gpu = is_cuda(device)
    n = buffer_bytes // 4
    a = torch.empty(n, dtype=torch.float32, device=device)
    b = torch.rand(n, dtype=torch.float32, device=device)
    c = torch.rand(n, dtype=torch.float32, device=device)
    params = {"elements": n, "dtype": "fp32", "buffer_bytes": buffer_bytes}
    out = [
        _bandwidth("copy torch", 2 * buffer_bytes, lambda: a.copy_(b), device, roof, params, reps),
        _bandwidth("triad torch", 3 * buffer_bytes, lambda: torch.add(b, c, alpha=3.0, out=a), device, roof,
                   params, reps),
    ]
    skipped = []
    if gpu:
        try:
            from profiler import triton_copy
        except ImportError as exc:
            skipped.append(f"memory triton: {exc}")
        else:
            kernels = (
                ("copy", 2 * buffer_bytes, lambda blk, w: triton_copy.copy(b, a, blk, w)),
                ("triad", 3 * buffer_bytes, lambda blk, w: triton_copy.triad(a, b, c, 3.0, blk, w)),
            )
            for kernel, moved, launch in kernels:
                best = None
                for block, warps in triton_copy.VARIANTS:
                    try:
                        m = _bandwidth(f"{kernel} triton", moved, lambda f=launch, bl=block, w=warps: f(bl, w),
                                       device, roof, {**params, "block": block, "num_warps": warps}, reps)
                    except Exception as exc:  # a variant the compiler rejects is a result, not a failure
                        skipped.append(f"memory {kernel} triton BLOCK={block} warps={warps}: "
                                       f"{type(exc).__name__}: {str(exc)[:100]}")
                        continue
                    if best is None or m.median > best.median:
                        best = m
                if best is not None:
                    out.append(best)
    else:
        skipped.append("memory triton: the Triton kernels run on a GPU only (the interpreter is no speed test)")
    return out, skipped


def _gpu_capacity(torch, device) -> tuple[float, dict]:
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    free_before, total = torch.cuda.mem_get_info(device)
    held, got = [], 0
    try:
        for chunk in (GIB, 256 * MIB, 16 * MIB):
            while True:
                try:
                    held.append(torch.empty(chunk, dtype=torch.uint8, device=device))
                except torch.cuda.OutOfMemoryError:
                    break
                got += chunk
    finally:
        held.clear()
        torch.cuda.empty_cache()
    return float(got), {"method": "allocate 1 GiB, 256 MiB, 16 MiB chunks until failure",
                        "free_before_bytes": free_before, "total_bytes": total, "capped": False}


def _available_bytes() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return float(line.split()[1]) * 1024
    return None


def _cpu_capacity(torch, quick: bool) -> tuple[float, dict]:
    avail = _available_bytes()
    cap = CPU_CAPACITY_CAP_QUICK if quick else CPU_CAPACITY_CAP
    if avail:
        cap = min(cap, int(avail // 2) // (64 * MIB) * 64 * MIB)
    held, got = [], 0
    try:
        while got + 64 * MIB <= cap:
            try:
                held.append(torch.ones(64 * MIB, dtype=torch.uint8))  # touched: really committed
            except (RuntimeError, MemoryError):
                break
            got += 64 * MIB
    finally:
        held.clear()
    return float(got), {"method": "allocate and touch 64 MiB chunks up to a cap", "cap_bytes": cap,
                        "available_bytes": avail, "capped": got >= cap}


def measure_capacity(torch, device, roof: Rooflines, quick: bool = False) -> tuple[list[Measurement], list[str]]:
    """Usable memory in bytes (a lower bound on the CPU, where it is capped)."""
    if is_cuda(device):
        got, params = _gpu_capacity(torch, device)
    else:
        got, params = _cpu_capacity(torch, quick)
    skipped = []
    if params.get("capped"):
        skipped.append(f"memory capacity: capped at {params['cap_bytes'] / GIB:.2f} GiB on the CPU (a lower bound)")
    return [measurement(dimension="memory_capacity", name="usable bytes", unit="bytes", samples=[got],
                        roofline=roof.mem_capacity_bytes, roofline_source=f"{roof.source}: memory capacity",
                        params=params)], skipped
