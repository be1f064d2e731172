"""The serving process's memory policy: keep freed memory for the next KV payload.

in:  nothing (called once per process, by :class:`~executor.engine.Engine` on construction)
out: glibc's ``malloc`` set to keep freed blocks up to 1 GiB in its heap for reuse; True when applied

Why: a KV payload is tens of megabytes (the bench model's 1024-token prompt: 32 MiB), and every
export (``export_kv`` + ``KVPayload.to_bytes``), every wire encoding (``messages.encode``) and
every receive buffer allocates one afresh. glibc serves a block that large with ``mmap`` and
unmaps it when freed (its ``mmap`` threshold adapts only up to 32 MiB, and its heap top is
trimmed back to the system past twice the threshold), so each payload faults its pages in
again: about 3 us a page on the bench's host, 25 ms for 32 MiB — four to six times the copy
itself — and, as the threshold moved with what was freed before, in no predictable order (an
export of one size took 4-6 ms or 20-34 ms, bench/measure_runtime.measure_kv). Those copies
hold the GIL, so every other thread of the process (a decoder importing a KV, a decode step)
waited for them too. Measured 2026-12-05: a 1536-token payload's export went 5.6-7.8 ms twelve
times running with this policy, against 5.9-22.8 ms without; its encoding 2.4-3.1 ms (once 12.7) against
17-19 ms; a decoder's import beside P's export for a second consumer waited as long as that
export did.

What: ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` at 1 GiB (blocks up to that come from the
heap and stay there when freed: the process keeps its peak, as a server that holds its KV pool
does anyway) and ``M_ARENA_MAX`` 1 (every thread allocates from the main heap, so a payload
freed by the I/O thread is reused by P's worker; one arena's lock did not slow the forwards:
their wall ÷ thread CPU seconds as served stayed 1.02-1.09, as before, in bench_serve runs w and
x). ``PLACER_KEEP_FREED_MEMORY=0`` leaves malloc as it was. Elsewhere than glibc (macOS, musl)
nothing is changed and False is returned.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
RETAIN_BYTES = 1 << 30
ENV = "PLACER_KEEP_FREED_MEMORY"

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Apply the policy once per process; True when glibc took it (see the module docstring)."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    libc = _glibc()
    if libc is not None:
        _applied = all(libc.mallopt(param, value) == 1 for param, value in
                       ((M_MMAP_THRESHOLD, RETAIN_BYTES), (M_TRIM_THRESHOLD, RETAIN_BYTES), (M_ARENA_MAX, 1)))
    return _applied


def _glibc():
    """The C library when it is glibc (it has ``gnu_get_libc_version`` and ``mallopt``), else None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallopt.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None
