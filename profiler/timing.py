"""Timing: warm-up, repeated timed runs, median and spread.

in:  a zero-argument callable and the device it runs on
out: :class:`Samples`, seconds per run (device-side with CUDA events on a GPU, wall
     clock on the CPU), and :func:`summarize` for any list of rates.

Imports only the standard library at module level (torch is passed in or imported
lazily), so the GPU-side runner and the link probe stay light.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Stats:
    """Median and spread of repeated samples (rates or seconds)."""

    median: float
    min: float
    max: float
    spread_rel: float  # (max - min) / median: how far apart the runs were
    stdev_rel: float  # sample standard deviation / median (0 for one sample)
    n: int


def summarize(values: list[float]) -> Stats:
    """Median, extremes and relative spread of ``values`` (at least one)."""
    if not values:
        raise ValueError("summarize: no samples")
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    scale = abs(med) if med else 1.0
    return Stats(median=med, min=lo, max=hi, spread_rel=(hi - lo) / scale, stdev_rel=sd / scale, n=len(values))


def is_cuda(device) -> bool:
    return getattr(device, "type", str(device).split(":")[0]) == "cuda"


def time_runs(fn: Callable[[], object], device, warmup: int = 2, reps: int = 5,
              inner: int = 1) -> list[float]:
    """Seconds per call of ``fn`` over ``reps`` timed repetitions after ``warmup`` calls.

    Each repetition calls ``fn`` ``inner`` times back to back and divides, so launches
    shorter than the timer's resolution still measure the work. On CUDA the time is
    read from events recorded on the current stream (device time, no host overhead
    between back-to-back launches); elsewhere from ``time.perf_counter``.
    """
    if reps < 1 or inner < 1 or warmup < 0:
        raise ValueError(f"time_runs: reps={reps}, inner={inner} must be >= 1 and warmup={warmup} >= 0")
    for _ in range(warmup):
        fn()
    if is_cuda(device):
        import torch

        torch.cuda.synchronize(device)
        out = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3 / inner)
        return out
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t0) / inner)
    return out


def rates(amount: float, seconds: list[float]) -> list[float]:
    """``amount`` per second for each timed run (FLOP/s, bytes/s, …)."""
    return [amount / s for s in seconds if s > 0]


def auto_inner(fn: Callable[[], object], device, target_s: float, max_inner: int = 1000) -> int:
    """How many back-to-back calls of ``fn`` make one timed repetition last about ``target_s``.

    Calls ``fn`` twice (the first also warms it up).
    """
    fn()
    once = max(time_runs(fn, device, warmup=0, reps=1)[0], 1e-7)
    return max(1, min(max_inner, round(target_s / once)))
