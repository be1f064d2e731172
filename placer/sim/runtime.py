"""What the executor's serving runtime adds to the engine's forwards, as the simulator replays it.

in:  figures measured on the machine that serves (``bench/measure_runtime.py`` writes them
     as JSON; :meth:`ExecutorRuntime.from_json` reads them, errors name the field)
out: :class:`ExecutorRuntime` (a :class:`~placer.sim.config.SimConfig` field: ``runtime``), its named
     overhead terms, and :class:`Host`, the cores the instances of one process share.

Without a runtime the simulator replays the planner's idealised deployment (one chip per
instance, RDMA between P and decoders, packed prefills). With one, it replays the executor
as ``executor.cluster.LocalCluster`` runs it, each rule read from the executor's code:

* one prefill per forward, FCFS, no chunking or packing (``executor/roles/p.py``): :mod:`placer.sim.prefill`;
* decoders step every decoding request, no batch cap (``roles/md.py``, ``rld.py``): :mod:`placer.sim.decode`;
* a message (a KV, an order) waits for the step in progress (``roles/common.py: run_once``):
  :meth:`~placer.sim.decode.DecodeInstance.step_boundary`; every request admitted (``executor.admission``);
* the KV exported on P's worker for each consumer's pull and imported on the decoder's, P's exports of one
  forward before its consumers' imports (the GIL): ``kv_export_*``, ``kv_import_*``, :mod:`placer.sim.events.kv`;
* pulls between two steps, P serving one after its forward (``roles/p.py: early_pulls``): :mod:`placer.sim.events.kv`;
* the emulated line (``executor/transport/link.py``): one round-robin serialiser per direction, each frame
  one way plus jitter, a connection's frames in order, a KV joining a busy connection behind its buffered
  bytes, a small message's turn, the socket path's latency: ``wan_*``, :class:`~placer.sim.links.WanLink`;
* the cores, the GIL, the paces, the interference of forwards and of a busy line, the host's speed over
  time: :class:`Host`.

How each term was measured, with every dated run and figure: docs/benchmarks.md, "The executor runtime's
overhead terms: how they were measured".
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


class Host:
    """The cores a run's instances share with each other, the GIL, and the machine's other work.

    With n of our instances computing, each forward takes n / speedup(n) times its CPU
    time (``ExecutorRuntime.speedup``: measured concurrent throughput in one process,
    cores and GIL together), times the measured one-thread ``slowdown`` that the
    machine's other work causes — or, for a table's prefill or decode seconds, times that
    phase's measured pace (:meth:`factor`), all of it times the host's speed at the time where the
    runtime gives it as a timeline (``host_pace``). A table's forward is also charged what the other
    busy forwards' kinds cost it (``ExecutorRuntime.interference``). While a WAN line carries
    bytes, the process's I/O thread moves them: where the runtime measured a forward beside a
    busy line, that figure is charged, in proportion to the busy lines' rate over the measured
    line's (the I/O thread's work grows with the bytes it moves); where not, n counts the I/O
    thread's share of a core (``wan_cpu_s_per_byte`` × the lines' rate).
    """

    __slots__ = ("runtime", "busy", "kinds", "decoders", "prefills", "io_cores", "line_rate", "lines", "measured_line",
                 "charge_line", "drift", "drift_prefill")

    def __init__(self, runtime: ExecutorRuntime):
        self.runtime = runtime
        self.busy = 0
        self.kinds = dict.fromkeys(KINDS, 0)  # busy instances by the kind of forward they run
        self.io_cores = 0.0  # the I/O thread's load now: Σ over busy lines of rate × wan_cpu_s_per_byte
        self.line_rate = 0.0  # bytes/s the busy lines carry now
        self.lines: dict = {}  # busy line → its rate (bytes/s)
        # a busy line's cost measured (charge it, not the I/O share) or inside the calibrated paces (charge nothing)
        self.measured_line = runtime.line_rows() or runtime.line_in_pace
        self.charge_line = runtime.line_rows() and not runtime.line_in_pace  # read once: factor is on the hot path
        self.decoders: list = []  # re-timed when the busy count changes
        self.prefills: list = []  # so is a prefill in flight
        self.drift = 1.0  # the host's speed now about the paces' level (ExecutorRuntime.host_pace)
        self.drift_prefill: float | None = None  # the prefills' own, where read apart (host_pace_prefill)

    def factor(self, kind: str = "", own: str | None = None, batch: int = 0) -> float:
        """Wall seconds per CPU second of each running forward now: of the runtime's CPU-second
        overheads (``kind`` empty: × ``slowdown``), or of a table's ``"prefill"`` or ``"decode"``
        seconds (× that phase's measured pace, ``slowdown`` where it was not measured, × what the
        other busy forwards and the busy lines cost it). ``own``: the kind the caller is counted busy
        as (default ``kind``; a decoder's extend is a prefill-shaped forward on a decoder); ``batch``: a
        decode step's sequences (what it suffers from a neighbour depends on it, where measured so)."""
        rt = self.runtime
        n = (self.busy if self.busy > 1 else 1) + (0.0 if kind and self.measured_line else self.io_cores)
        pace = rt.prefill_pace if kind == "prefill" else rt.decode_pace if kind == "decode" else 0.0
        drift = self.drift_prefill if kind == "prefill" and self.drift_prefill is not None else self.drift
        base = (pace or rt.slowdown) * drift * n / rt.speedup_at(n)
        if not kind or not rt.interference:
            return base
        if self.charge_line and self.line_rate:
            base *= 1.0 + (rt.beside(kind, "line", batch) - 1.0) * self.line_rate / rt.line_bytes_per_s
        own = kind if own is None else own
        others = {k: c - (k == own) for k, c in self.kinds.items()}
        total = sum(c for c in others.values() if c > 0)
        if total <= 0:
            return base
        beside = sum(c * rt.beside(kind, k, batch) for k, c in others.items() if c > 0) / total
        # the pair's cost is measured whole (cores, GIL, memory): speedup only adds the threads past two
        return base * beside * rt.speedup_at(2) / 2

    def line(self, t: float, link, busy: bool) -> None:
        """A WAN line started or stopped carrying bytes: the I/O thread moves them at the line's rate."""
        rate = link.rate if busy else 0.0
        if self.lines.get(link, 0.0) == rate:
            return
        if rate:
            self.lines[link] = rate
        else:
            self.lines.pop(link, None)
        self.line_rate = sum(self.lines.values())
        self.io_cores = self.line_rate * self.runtime.wan_cpu_s_per_byte
        self.change(t, 0)

    def set_drift(self, t: float, factor: float, prefill: bool = False) -> None:
        """From ``t`` on the host runs at ``factor`` × the paces' level (``ExecutorRuntime.host_pace``; with
        ``prefill``, for the prefill forwards alone: ``host_pace_prefill``)."""
        if prefill:
            if factor != self.drift_prefill:
                self.drift_prefill = factor
                self.change(t, 0)
        elif factor != self.drift:
            self.drift = factor
            self.change(t, 0)

    def change(self, t: float, delta: int, kind: str = "") -> None:
        """``delta`` instances started (+1) or stopped (−1) running forwards of ``kind`` at ``t``."""
        self.busy += delta
        if kind:
            self.kinds[kind] += delta
        for inst in self.decoders:
            if inst.B:
                inst.retime(t)
        for inst in self.prefills:
            if inst.busy:
                inst.retime(t)
