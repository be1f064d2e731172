"""The executor's serving runtime on one host, as measured: the figures the simulator replays and the planner prices.

in:  figures measured on the machine that serves (``bench/measure_runtime.py`` writes them as JSON;
     :meth:`ExecutorRuntime.from_json` reads them through the input gate, errors name the field)
out: :class:`ExecutorRuntime`, its named overhead terms (what one export, one import, one WAN message
     costs), :func:`interference_rows`

A planner base module (standard library and :mod:`placer.errors` / :mod:`placer.readers` only): the
simulator replays these figures (:mod:`placer.sim.runtime`, which re-exports them, and its ``Host``) and
the planner prices a request's share of them on its first token's path (:mod:`placer.executor_costs`).
How each term was measured: docs/benchmarks.md, "The executor runtime's overhead terms: how they were
measured".
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from functools import cached_property
from pathlib import Path

from placer.errors import InputError
from placer.readers import load_mapping


@dataclass(frozen=True)
class ExecutorRuntime:
    """The executor's serving runtime on one host: named overhead terms, measured (docs/benchmarks.md)."""

    cores: float
    """CPUs the serving process may run on (bench/measure_runtime.py: the process's affinity)."""
    slowdown: float
    """Wall ÷ CPU seconds of one thread's forward, >= 1: the machine's other work (measure_runtime.probe_slowdown)."""
    request_overhead_s: float
    """A request's CPU seconds beyond the engine's: dispatch, messages (measure_runtime.lone_request_cpu_s)."""
    kv_export_bytes_per_s: float
    """KV export + serialisation rate on P's worker, per consumer pull (measure_runtime.measure_kv)."""
    kv_import_bytes_per_s: float
    """KV deserialisation + import rate on the decoder's worker, stalling its batch (measure_runtime.measure_kv)."""
    token_stream_s: float
    """CPU seconds per request per decode step: its Tokens message (measure_runtime.lone_request_cpu_s)."""
    kv_export_fixed_s: float = 0.0
    """An export's cost beyond its bytes; 0: not measured (measure_runtime.measure_kv)."""
    kv_import_fixed_s: float = 0.0
    """An import's cost beyond its bytes; 0: not measured (measure_runtime.measure_kv)."""
    wan_cpu_s_per_byte: float = 0.0
    """The I/O thread's CPU seconds per byte crossing the emulated line; 0: none (measure_runtime.measure_wan_cpu)."""
    prefill_pace: float = 0.0
    """A lone prefill's wall ÷ table seconds; 0: ``slowdown`` (measure_runtime.probe_forwards, served_forwards)."""
    decode_pace: float = 0.0
    """The same for a lone decode step; 0: ``slowdown`` (measure_runtime.probe_forwards, served_forwards)."""
    speedup: tuple[float, ...] = ()
    """k = 1, 2, … concurrent forwards' throughput ÷ one's; empty: the cores (measure_runtime.measure_speedup)."""
    interference: tuple[tuple[str, str, float], ...] = ()
    """(kind, beside, factor): a forward beside a kind or a busy line ÷ alone (measure_runtime.probe_interference)."""
    line_bytes_per_s: float = 0.0
    """The busy line's rate the ``line`` rows were measured beside; 0: none (measure_runtime.probe_interference)."""
    ttft_overhead_s: float = 0.0
    """The overhead on the first token's path; 0: ``request_overhead_s`` stands in (measure_runtime.measure_runtime)."""
    wan_frame_bytes: float = 0.0
    """A WAN frame, delayed on its own, in order per connection; 0: one draw (executor.transport.tcp.CHUNK_BYTES)."""
    wan_latency_s: float = 0.0
    """A WAN message's socket path beyond the line's shaping, fixed part (measure_runtime.measure_line_path)."""
    wan_latency_s_per_byte: float = 0.0
    """The same, per byte of the message (measure_runtime.measure_line_path)."""
    wan_latency_beside_s: tuple[float, ...] = ()
    """A WAN message's extra beside k = 1, 2, … busy engine threads, past the table its last (measure_line_path)."""
    wan_hol_bytes: float = 0.0
    """Bytes a KV joining a busy connection waits behind, past the read-ahead (measure_runtime.measure_line_path)."""
    wan_read_ahead_s: float = 0.0
    """The relay's read-ahead per connection, in seconds of line time (executor.transport.link.READ_AHEAD_S)."""
    line_in_pace: bool = False
    """Paces and interference read off a calibration serve, a busy line's cost in them (bench/served_forwards.py)."""
    host_pace: tuple[tuple[float, float], ...] = ()
    """(from s, factor): the host's speed within a run, × every charge; empty: steady (bench/bench_serve.py)."""
    host_pace_prefill: tuple[tuple[float, float], ...] = ()
    """The same for the prefill forwards alone; empty: ``host_pace`` holds for them (bench/bench_serve.py)."""
    source: str = ""
    """Who measured these figures, where and when (bench/measure_runtime.py)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("source", "speedup", "interference"):
                continue
            if f.name == "wan_latency_beside_s":
                v = self.wan_latency_beside_s
                if not isinstance(v, tuple) or not all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0
                                                       for x in v):
                    raise InputError(f"runtime.wan_latency_beside_s: must be a list of numbers >= 0 (seconds), "
                                     f"got {v!r}")
                continue
            if f.name in ("host_pace", "host_pace_prefill"):
                _check_host_pace(getattr(self, f.name), f.name)
                continue
            if f.name == "line_in_pace":
                if not isinstance(self.line_in_pace, bool):
                    raise InputError(f"runtime.line_in_pace: must be true or false, got {self.line_in_pace!r}")
                continue
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"runtime.{f.name}: must be a number, got {value!r}")
            positive = f.name in ("cores", "slowdown", "kv_export_bytes_per_s", "kv_import_bytes_per_s")
            if (positive and value <= 0) or value < 0:
                raise InputError(f"runtime.{f.name}: must be {'> 0' if positive else '>= 0'}, got {value!r}")

    def speedup_at(self, k: float) -> float:
        """Throughput of k concurrent forwards ÷ one's (measured; past the table, its last value; a
        fraction of a thread — the I/O thread's share — between the table's neighbours), never above
        min(k, cores): k threads on C cores cannot do more than that, whatever a noisy probe read."""
        if k <= 1:
            return 1.0
        most = min(float(k), self.cores)
        if not self.speedup:
            return most
        lo = int(k)
        at = lambda i: self.speedup[min(i, len(self.speedup)) - 1]
        got = at(lo) + (k - lo) * (at(lo + 1) - at(lo)) if k > lo else at(lo)
        return min(got, most)

    def beside(self, kind: str, other: str, batch: int = 0) -> float:
        """``kind``'s forward beside one ``other`` forward (or a busy line) ÷ alone (1 where not measured).
        A decode step of ``batch`` sequences: where decode steps were measured at several batches
        (``decode@B`` rows), linear in the batch between them, the nearest one's outside."""
        if kind == "decode" and batch:
            points = self._decode_points.get(other)
            if points:
                if batch <= points[0][0]:
                    return points[0][1]
                for (b0, v0), (b1, v1) in zip(points, points[1:]):
                    if batch <= b1:
                        return v0 + (batch - b0) * (v1 - v0) / (b1 - b0)
                return points[-1][1]
        for a, b, v in self.interference:
            if b == other and (a == kind or (kind == "decode" and a.startswith("decode@"))):
                return v  # a decode step of no given batch: the first batch measured
        return 1.0

    def path_overhead_s(self) -> float:
        """A request's overhead on its first token's path (CPU seconds where only those were measured)."""
        return self.ttft_overhead_s or self.request_overhead_s

    def wan_message_s(self, n_bytes: float = 0.0, busy: int = 0) -> float:
        """A message's latency through the socket path across a WAN line, beyond the line's shaping, with
        ``busy`` engine threads running forwards meanwhile."""
        d = self.wan_latency_s + n_bytes * self.wan_latency_s_per_byte
        if busy > 0 and self.wan_latency_beside_s:
            d += self.wan_latency_beside_s[min(busy, len(self.wan_latency_beside_s)) - 1]
        return d

    def export_s(self, n_bytes: float) -> float:
        """One export of ``n_bytes`` of KV for one consumer's pull (CPU seconds on P's worker)."""
        return self.kv_export_fixed_s + n_bytes / self.kv_export_bytes_per_s

    def import_s(self, n_bytes: float) -> float:
        """One import of ``n_bytes`` of KV (CPU seconds on the decoder's worker)."""
        return self.kv_import_fixed_s + n_bytes / self.kv_import_bytes_per_s

    @classmethod
    def from_dict(cls, data: dict) -> ExecutorRuntime:
        if not isinstance(data, dict):
            raise InputError(f"runtime: expected an object, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names - {"measurements"})
        if unknown:
            raise InputError(f"runtime: unknown field {unknown[0]!r}")
        missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in data]  # the rest: optional
        if missing:
            raise InputError(f"runtime: missing field {sorted(missing)[0]!r}")
        speedup = data.get("speedup", ())
        if not isinstance(speedup, (list, tuple)) or not all(isinstance(x, (int, float)) and x > 0 for x in speedup):
            raise InputError(f"runtime.speedup: must be a list of positive numbers, got {speedup!r}")
        timelines = {}
        for name in ("host_pace", "host_pace_prefill"):
            points = data.get(name, ())
            if not isinstance(points, (list, tuple)) or not all(isinstance(p, (list, tuple)) for p in points):
                raise InputError(f"runtime.{name}: must be a list of [from s, factor] pairs, got {points!r}")
            timelines[name] = tuple(tuple(p) for p in points)
        beside = data.get("wan_latency_beside_s", ())
        rt = cls(**{**{k: v for k, v in data.items() if k in names}, "speedup": tuple(speedup),
                    "wan_latency_beside_s": tuple(beside) if isinstance(beside, list) else beside,
                    "interference": interference_rows(data.get("interference", {})), **timelines})
        if rt.line_rows() and not rt.line_bytes_per_s:
            raise InputError("runtime.line_bytes_per_s: the interference beside 'line' needs the rate of the line "
                             f"it was measured beside (> 0), got {rt.line_bytes_per_s!r}")
        return rt

    @cached_property
    def _decode_points(self) -> dict[str, list[tuple[int, float]]]:
        """beside → [(batch, factor), …] of the ``decode@B`` rows, by batch (read once: ``beside`` is on
        the simulator's hot path)."""
        points: dict[str, list[tuple[int, float]]] = {}
        for a, b, v in self.interference:
            if a.startswith("decode@"):
                points.setdefault(b, []).append((int(a[7:]), v))
        return {b: sorted(p) for b, p in points.items()}

    def line_rows(self) -> bool:
        """Whether the interference of a busy line was measured (then it, not ``wan_cpu_s_per_byte``'s share
        of a core, is what a busy line costs the forwards)."""
        return any(b == "line" for _, b, _ in self.interference)

    @classmethod
    def from_json(cls, path: str | Path) -> ExecutorRuntime:
        """The runtime a measurement wrote (bench/measure_runtime.py), read through the input gate."""
        return cls.from_dict(load_mapping(path, "runtime", kind="json"))


def _check_host_pace(points, name: str = "host_pace") -> None:
    """InputError unless ``points`` are (time, factor > 0) pairs of finite numbers at increasing times."""
    last = -math.inf
    for i, point in enumerate(points):
        ok = isinstance(point, tuple) and len(point) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in point)
        if not ok or point[1] <= 0 or point[0] <= last:
            raise InputError(f"runtime.{name}[{i}]: must be a [from s, factor > 0] pair of numbers after the "
                             f"one before, got {point!r}")
        last = point[0]


KINDS = ("prefill", "decode")
BESIDE = (*KINDS, "line")  # what a forward was timed beside: another forward, or a busy WAN line


def interference_rows(data) -> tuple[tuple[str, str, float], ...]:
    """``{"decode@1": {"prefill": 1.23, …}, …}`` (measure_runtime's JSON) as (kind, beside, factor) rows.
    Kinds: ``prefill``, ``decode``, or ``decode@B``: a decode step of B sequences."""
    if not isinstance(data, dict):
        raise InputError(f"runtime.interference: expected an object of kinds, got {data!r}")
    rows = []
    for kind, row in data.items():
        batch = kind[7:] if isinstance(kind, str) and kind.startswith("decode@") else ""
        if kind not in KINDS and not (batch.isdigit() and int(batch) >= 1):
            raise InputError(f"runtime.interference: kind must be one of {', '.join(KINDS)} or decode@<batch>, "
                             f"got {kind!r}")
        if not isinstance(row, dict):
            raise InputError(f"runtime.interference.{kind}: expected an object, got {row!r}")
        for other, v in row.items():
            if other not in BESIDE:
                raise InputError(f"runtime.interference.{kind}: must be one of {', '.join(BESIDE)}, got {other!r}")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InputError(f"runtime.interference.{kind}.{other}: must be a number > 0, got {v!r}")
            rows.append((kind, other, float(v)))
    return tuple(rows)
