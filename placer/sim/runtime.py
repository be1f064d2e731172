"""What the executor's serving runtime adds to the engine's forwards, as the simulator replays it.

in:  figures measured on the machine that serves (``bench/measure_runtime.py`` writes them
     as JSON; :meth:`ExecutorRuntime.from_json` reads them, errors name the field)
out: :class:`ExecutorRuntime` (a :class:`~placer.sim.config.SimConfig` field: ``runtime``; it lives in the
     planner base, :mod:`placer.executor_runtime`, re-exported here), its named overhead terms, and
     :class:`Host`, the cores the instances of one process share.

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

# the figures live in the planner base (the planner prices them too); re-exported: the simulator's surface
from placer.executor_runtime import (  # noqa: F401
    BESIDE, KINDS, ExecutorRuntime, interference_rows,
)


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
