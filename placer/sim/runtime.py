"""What the executor's serving runtime adds to the engine's forwards, as the simulator replays it.

in:  figures measured on the machine that serves (``bench/measure_runtime.py`` writes them
     as JSON; :meth:`ExecutorRuntime.from_json` reads them, errors name the field)
out: :class:`ExecutorRuntime` (a :class:`~placer.sim.config.SimConfig` field: ``runtime``)
     and :class:`Host`, the cores the instances of one process share.

Without a runtime the simulator replays the planner's idealised deployment (one chip per
instance, RDMA between P and decoders, packed prefills). With one, it replays the
executor as ``executor.cluster.LocalCluster`` runs it — every rule below is read from
the executor's code, every number is measured:

* **One prefill per loop turn** (``executor/roles/p.py``: ``PrefillWorker.step`` pops one
  order and calls ``Engine.prefill``, which forwards all of the prompt's uncached tokens
  in ONE forward — no chunking, no packing of several prompts). So P is FCFS, one request
  per forward, costed by the measured table at (new tokens, cached context)
  (:meth:`~placer.perfmodel.InstanceModel.prefill_chunk_s`).
* **Decoders step every decoding request** (``executor/roles/md.py`` / ``rld.py``:
  ``step`` runs ``Engine.decode_step`` over all requests in DECODING): no batch cap
  besides the KV pool (continuous batching; a request joins between two steps).
* **Messages wait for the step in progress** (``executor/roles/common.py``: ``run_once``
  drains the inbox, then runs one step): a KV that lands on a decoder mid-step is
  imported — and its t0 streamed — only when that step ends
  (:meth:`~placer.sim.decode.DecodeInstance.step_boundary`). No figure: the step's own
  time. The executor reports this wait per request (``md_kv_inbox_s`` /
  ``rld_kv_inbox_s`` in the request record): 9-57 ms medians under the bench's load.
* **Admission**: ``executor.admission.AdmissionPolicy`` limits nothing by default (no
  ``max_live``, no ``max_per_instance``), so every request is admitted and queues at P;
  the simulator admits every request too (a plan with limits is not replayed here).
* **KV serialisation on the workers' threads**: P's worker exports and serialises the KV
  for each consumer's pull (``export_kv`` + ``KVPayload.to_bytes``) right after the
  prefill, before its next one; the decoder's worker deserialises and imports it
  (``from_bytes`` + ``import_kv``), stalling its batch meanwhile. Each costs a fixed part and one per
  byte: ``kv_export_fixed_s`` + bytes ÷ ``kv_export_bytes_per_s``, the same for imports (measured: the
  line through the means of 15 exports and imports of a 1024-token prompt's KV of the bench model and
  of a turn's 48 tokens past it, ``bench/measure_runtime.measure_kv``; the engine keeps freed memory for
  the next payload, ``executor/engine/memory.py``, without which an export's cost was bimodal). The
  fixed part is most of a turn's: served turns' 1.5 MB took 0.4-0.7 ms to export and 0.6-1.4 ms to
  import where the rate alone gives 0.25 ms (bench_serve runs h-z2, 2026-12-05; measured apart, 0.15-0.17
  and 0.38-0.40 ms of thread CPU). The copies hold the GIL: a decoder importing while P serialises
  for another consumer waits for that (measured: an RLD import of 3.5 ms took as long as P's
  export for MD beside it), so P's exports of one forward all come before its consumers' imports
  here — RLD's KV is handed over when P has also exported MD's. Inside a datacenter the
  payload then goes by the in-process fast path (an object handed over: no bytes on a
  wire), so no RDMA time is added.
* **Per request overhead** ``ttft_overhead_s``: the router's dispatch (admission, routing,
  orders through the outbox) and the hops of the orders, the KV and the first token between
  the router's and the workers' threads — paid before the prefill (measured: lone
  same-datacenter requests' TTFT less the engine's prefill, export and import, as the
  executor records them). ``request_overhead_s``, the CPU seconds of a request beyond the
  engine's (process CPU time of the same lone requests less the engine's own for their
  prefill, export, import and steps), stands in where it was not measured: it is 4-5 times
  more (5-8 ms against 1.3-1.9 ms, 2026-12-04), most of it off the first token's path (PrefillDone,
  KVDone, the stream's end), and charged whole before the prefill it put same-dc's turns'
  first tokens 13-25 % late (bench_serve run s).
* **Per streamed token** ``token_stream_s``: each decode step sends one ``Tokens``
  message per request to the router (encode, endpoint, I/O loop) — CPU seconds added
  per request to the step (measured: a lone request's decoder thread's CPU time beyond its
  engine's forwards, per output token; the I/O and router threads' share runs beside the next
  step and is not charged to it).
* **The I/O thread**: every socket, and the ``LinkEmulator`` relay, runs on one asyncio
  thread of the process (``executor/transport/frames.py: IoLoop``); bytes crossing the
  emulated line are framed, relayed, reassembled and decoded there, in Python, beside the
  engines' threads. ``wan_cpu_s_per_byte`` (measured: process CPU time of one KV-sized
  message sent through an in-process line, per byte) times a busy line's rate is that
  thread's load, which :class:`Host` adds to the busy forwards where what a busy line costs
  a forward was not measured (below: interference); the runtime's CPU-second overheads
  always see it (same-datacenter messages are handed over in process: no bytes, no load).
* **Pulls, between two steps** (``executor/roles/md.py`` / ``rld.py``: ``on_order`` →
  ``_pull``; ``roles/p.py``: ``on_pull``, ``early_pulls``): each decoder handles its order —
  and sends ``KVPull`` to P — between two of its steps, so a busy decoder's pull leaves when
  its step in progress ends (plus the line's one way each way across datacenters). P serves a
  pull that came before the prefill ended right after the forward (its export is part of that
  forward); a later one at P's next loop turn (when the forward in flight ends), exporting it
  then. A busy decoder has meanwhile begun its next step, so the KV lands in it and waits for
  it too (the rule above): a request that reaches a stepping decoder waits more than one
  step, not half of one on average. Measured in bench_serve's same-datacenter run (D's steps
  ~0.26 s): P's prefill ended uniformly over D's steps, but the KV reached D within the first
  tenth of a step for half the requests, and P's prefill end → import took 1.1 steps at the
  median — the phase lock this rule reproduces. No figure: the steps' own times.
* **The line** (``executor/transport/link.py``, ``LinkEmulator``): one serialiser per
  direction at the line's rate (``LineClock``: the line's own timeline, so the relay
  thread's late wake-ups cost no capacity), shared round-robin by every transfer
  (processor sharing, as :class:`~placer.sim.links.WanLink` does), then each frame one way RTT/2 plus normal
  jitter of standard deviation ``jitter_ms``, clamped at 0 (``LinkShape.arrival_delay_s``);
  the KV pays that one way, and the first token streamed back to the router from the far
  datacenter another.
* **Frames in order** (``wan_frame_bytes``): the emulator draws each frame's delay on its own and
  releases a frame no earlier than the frame before it on the same connection (``link.py``:
  ``release = max(end + delay, relay.last_release)``: TCP's order). A KV of m frames therefore
  lands when the latest of its connection's last frames does: the maximum over them of their own
  delay less how much earlier they crossed (frames of one connection cross ``frame × n ÷ rate``
  apart with n transfers sharing the line round robin), not one draw — 2.2 ms more at the median
  for a 1.5 MB KV at 200 Mbit/s with 5 ms of jitter. The first token MD streams back waits the same
  way behind the Tokens messages its last steps sent to the router, one per sequence per step
  (``roles/md.py: _advance``): 2-4 ms more with 1-3 sequences decoding. Served (bench_serve,
  2026-12-04 run r), the turns' KV reached MD 19-25 ms after its bytes' line time at the median,
  and t0 the router 18 ms after MD sent it, against the line's 15 ms one way.
* **A transfer joining a busy connection** (``wan_hol_bytes``, ``wan_read_ahead_s``): one connection from
  P's endpoint to a decoder's carries all of their KV (``executor/transport/tcp.py``), and the round-robins
  that share the line are the sender's and the relay's (``link.py``); the relay reads ahead ``READ_AHEAD_S``
  of line time per connection, and the sockets and the relay's reader between the two hold bytes that are
  past the sender's round-robin but not yet where the relay's sees them. A KV that joins a connection whose
  other transfers fill the read-ahead waits behind those — up to ``wan_hol_bytes`` — crossing at the
  connection's share of the line, then shares it (:meth:`~placer.sim.links.WanLink.add`); the line loses no
  capacity. Measured (``bench/measure_runtime.py: measure_line_path``): a 1.5 MiB KV sent while a
  14 MiB one crossed took 13-18 ms longer on the same connection than from another endpoint at
  200 Mbit/s, ~0.4 MB; in bench_serve's cross-dc and pdd serves (2026-12-04/05, runs y-z2) the turns whose
  KV shared the line with a new conversation's took 13-26 ms more than processor sharing gives.
* **The socket path** (``wan_latency_s``, ``wan_latency_s_per_byte``, ``wan_latency_beside_s``): a message
  crossing the emulated line also goes through the relay's timer (it holds each frame until its release), its
  delivery, the receiving endpoint's read, reassembly and decode, and the hand-off to its handler — a fixed
  time and a part per byte, measured with lone messages of 256 B to 4 MiB through an in-process line of the
  served rate and round trip, no jitter (``measure_line_path``: 1.1-1.5 ms + 0.3-0.7 ns/byte, 2026-12-05;
  on a line without delay 0.6-0.9 ms, the relay forwarding at once), and more while engine threads run
  forwards, as they do beside every served message: the one I/O thread that relays, reads and decodes waits
  for a core and the GIL (``wan_latency_beside_s``, the mean over 25 small messages beside a decoder
  streaming its Tokens back, then a prefill too: +0.1-0.4 and +0.8-1.4 ms; beside three, +3 ms). Every WAN
  message pays it on the executor's runtime, with the host's busy forwards when it crosses: the orders (sent
  as P's prefill of the same request begins), the pulls, the KV, the first token back, the handoff. Served
  (2026-12-05, cross-dc, every message stamped), an order crossed in 18.1 ms at the median and a pull in
  16.9 ms against the line's 15 ms one way.
* **A message's turn on a busy line**: the relay serialises one frame at a time, round-robin over the
  transfers waiting in that direction (``link.py: _pace``); a small message joining n transfers waits for
  the frame on the line to end and one frame of each of them (:meth:`~placer.sim.links.WanLink.message_s`:
  half a frame expected, then n; a 64 KiB frame is 2.6 ms at 200 Mbit/s). No figure: the frame is the
  code's, ``wan_frame_bytes``.
* **Cores** (:class:`Host`): every instance runs in one process (one worker thread each,
  ``torch.set_num_threads(1)``), so forwards running at the same time share the
  ``cores`` CPUs and the GIL — as the measured ``speedup`` of k concurrent engine threads
  says — and the machine with its other work, as the measured ``slowdown`` of one
  thread says (see :class:`Host`). The measured tables and
  the overheads here are CPU seconds of one thread (``placer profile model --clock
  thread``), which other work does not inflate; the host turns them into wall seconds.
  ``slowdown`` and ``speedup`` describe the cores other work leaves, so they are measured
  together and when the run is served (``bench/measure_runtime.py: probe_host``, which
  bench_serve runs around each setup), not minutes apart under another load.
  A prefill in flight and a decode batch are re-timed whenever the number of busy
  instances changes (processor sharing: a forward started while the decoders were idle
  slows down when they start stepping — as the executor's does).
* **Pace** (``prefill_pace``, ``decode_pace``): a thread's CPU seconds for the same forward
  drift too on a shared host — memory bandwidth and the last-level cache are shared with
  other tenants, and the bench model's decode step is memory-bound (its KV, 32 KiB/token,
  is read whole every step), so its cost moves apart from the prefill's. The probe times
  lone forwards at a few grid points as the profiler times its table
  (``measure_runtime.probe_forwards``) around each setup; each phase's pace is their wall
  seconds ÷ the table's, the median over the points, and replaces ``slowdown`` for that
  phase's table seconds (P's KV export, which follows on the same thread, goes at the
  prefill's pace). Measured on bench_serve's host: 0.9-1.05 within minutes of the profile,
  the grid points of one probe ±10 % apart. The forwards a run serves went at 1.08-1.23
  (their thread CPU ÷ the table's, 2026-12-03): contention inside the serving process that a
  lone probe does not see.
* **Interference** (``interference``): two forwards on two cores still share the memory
  bus and the last-level cache. ``speedup`` is measured with prefills beside prefills,
  which are compute-bound and barely feel each other; a decode step, memory-bound, does.
  ``measure_runtime.probe_interference`` times a lone forward of each kind while one other
  engine thread runs forwards of each kind, alternating with no neighbour, around each
  setup: on bench_serve's host a decode step beside a prefill took 1.05-1.38x its time
  alone (1.23-1.25x on a quiet stretch) and beside another decode step 1.04-1.29x, while a
  prefill beside either took 0.96-1.29x (docs/benchmarks.md, 2026-12-03). A forward beside
  others is charged the mean of its kind's figure over the other busy forwards (by kind),
  which replaces what ``speedup`` charges for two threads; ``speedup`` still charges the
  threads past two (n / speedup(n) ÷ 2 / speedup(2): with more threads than cores, each runs
  beside one of the others at a time). Decode steps are timed at one and at four sequences
  (``decode@1``, ``decode@4``): a one-sequence step is mostly Python between small torch
  calls, so it waits for the GIL beside another thread more (beside another decoder
  1.06-1.33x in this session's probes, a four-sequence step 0.80-1.08x); a step of b
  sequences pays the figure linear in b between them (the nearest one's outside).
  ``bench/served_forwards.py`` checks this charge against every served forward, grouped by
  what the other instances ran meanwhile (bench_serve prints it).
* **A busy line** (``interference`` beside ``line``, at ``line_bytes_per_s``): the same probe
  times the lone forwards while an emulated line in the process carries KV at the served rate
  (``measure_runtime._Line``). A decode step beside a busy 200 Mbit/s line took 1.09-1.26x its
  time alone and a prefill 1.10-1.37x (2026-12-03, three probes) — more than the I/O thread's
  share of a core (0.25 at that rate) costs through ``speedup``, and part of it in the engine
  thread's own CPU time (1.14x in a 40 s alternating run): the I/O thread's GIL hand-offs
  between the engine's torch calls, and the bytes it moves through the caches. Where measured,
  a forward pays that figure while any line carries bytes, scaled by the busy lines' rate over
  the measured line's (the I/O thread's work grows with the bytes it moves), and the I/O
  thread's share no longer counts in n for the table's forwards; where not measured, n counts it.
* **Calibrated by a served trace** (``line_in_pace``): the probes' neighbours are bare forwards,
  while a serving process also runs the router, the transport's loops, the decoders' message
  handling and the I/O thread beside them. Served forwards went 1.03-1.42x the table with nothing
  of ours beside them against lone probes' 0.81-1.20 minutes apart, and pdd's decoders beside each
  other 1.65-1.88 wall per CPU second against the probes' 1.07-1.33 (2026-12-03). So the paces and
  the interference may instead be read off a calibration trace served by the same setup just before
  (``bench/served_forwards.py: calibration``; the same shape of trace with another seed, so other
  prompts and arrivals — a shorter one ran at other contexts and batches, where the table's error
  differs, and its decode pace missed the measured trace's by up to 40 %):
  a kind's pace is its served forwards' wall seconds ÷ the table's with no neighbour of ours, and
  its figure beside a kind is that group's ÷ the pace. The line's traffic was in those forwards, so
  a busy line adds nothing more and the I/O thread's share is not counted in n for them. It carries
  the serving process's cost over, not the host's drift between the two serves: a setup's decode
  pace moved by up to 40 % from one serve to the next (docs/benchmarks.md, 2026-12-03 afternoon).
* **The host's speed over time** (``host_pace``): where given, every charge from each listed time on
  is multiplied by its factor (:meth:`Host.set_drift`; the instances in flight are re-timed then).
  A shared host's speed moved within a serve — run y's same-dc serves (2026-12-05) ran their lone
  decode steps 0.87-1.43x the calibration's, 10 s by 10 s, 1.08-1.20x on the whole — which no
  figure measured beforehand can carry; ``bench/bench_serve.py`` reads the timeline off each
  serve's own lone forwards to tell that from the simulator's own error (its "as served" column).
  ``host_pace_prefill``, where given, is the prefills' own (P's forwards and a decoder's extend): the
  compute-bound prefill and the memory-bound decode step move apart, as the two paces above drift apart
  — over runs z-h2 (2026-12-05, 36 serves) a serve's decode steps moved 0.73-1.25x the calibration's and
  its prefills 0.91-1.35x, up to 0.2 apart (run h2, same-dc: decode 0.73, prefill 0.91), and one timeline
  read off all lone forwards (the decode steps, thousands, weigh most) charged the prefills the decode
  steps' move (h2 same-dc TTFT P50 −20 % as served; −8 % with the prefills' own).
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, dataclass, fields
from functools import cached_property
from pathlib import Path

from placer.errors import InputError


@dataclass(frozen=True)
class ExecutorRuntime:
    """The executor's serving runtime on one host (see the module docstring for each rule)."""

    cores: float
    """CPUs the serving process may run on (its instances' threads share them)."""
    slowdown: float
    """Wall ÷ CPU time of one thread's forward when the run happened (>= 1: other work on the machine)."""
    request_overhead_s: float
    """Router dispatch, control messages and worker wake-ups: the CPU seconds of a request beyond the engine's."""
    kv_export_bytes_per_s: float
    """KV export + serialisation on P's worker thread, per consumer pull."""
    kv_import_bytes_per_s: float
    """KV deserialisation + import on the decoder's worker thread (stalls its batch)."""
    token_stream_s: float
    """Per request per decode step: sending one Tokens message to the router."""
    kv_export_fixed_s: float = 0.0
    """An export's cost beyond its bytes (the payload's header, the request's bookkeeping); 0: not measured."""
    kv_import_fixed_s: float = 0.0
    """An import's cost beyond its bytes (the radix cache's walk, the blocks' allocation, the request); 0: not
    measured."""
    wan_cpu_s_per_byte: float = 0.0
    """CPU seconds the process's I/O thread spends per byte crossing the emulated WAN line (framing,
    the LinkEmulator's relay, reassembly and decoding); 0: not measured."""
    prefill_pace: float = 0.0
    """Wall seconds of one lone prefill forward when the run happened ÷ the measured table's seconds
    for it (the probe's median over a few grid points); 0: not measured, ``slowdown`` stands in."""
    decode_pace: float = 0.0
    """The same for one lone decode step (memory-bound: it drifts apart from prefill on a shared host)."""
    speedup: tuple[float, ...] = ()
    """Aggregate throughput of k = 1, 2, … concurrent forwards in the process ÷ one's (cores and GIL);
    empty: the cores alone (k / max(1, k / cores))."""
    interference: tuple[tuple[str, str, float], ...] = ()
    """(kind, beside, factor): wall seconds of a lone ``kind`` forward while one other engine thread
    runs ``beside`` forwards ÷ its seconds alone (kinds: prefill, decode), or while an emulated WAN
    line in the process carries KV at ``line_bytes_per_s`` (beside ``line``); empty: not measured (1)."""
    line_bytes_per_s: float = 0.0
    """The rate of the busy line the ``line`` rows were measured beside; 0: no ``line`` rows."""
    ttft_overhead_s: float = 0.0
    """The wall seconds of those on the first token's path (a lone request's TTFT less its prefill, KV
    export and import); 0: not measured, ``request_overhead_s`` stands in."""
    wan_frame_bytes: float = 0.0
    """The transport's frame on a WAN line (``executor.transport.tcp.CHUNK_BYTES``: read from the code, not
    measured). The emulated line delays each frame by its own draw and never lets one overtake an earlier
    frame of its connection, so a message lands when the latest of its connection's frames does
    (:class:`~placer.sim.links.WanLink`); 0: one draw per message."""
    wan_latency_s: float = 0.0
    """A message's time through the executor's socket path across a WAN line beyond the line's shaping (the
    relay's wake-up and write, the receiving endpoint's read, reassembly and decode, the hand-off to the
    handler): fixed part; 0: not measured."""
    wan_latency_s_per_byte: float = 0.0
    """Its part per byte of the message (the reassembled payload decoded after its last frame)."""
    wan_latency_beside_s: tuple[float, ...] = ()
    """What a message takes more on the mean while k = 1, 2, … engine threads run forwards beside it (the k-th
    value; past the table, its last): the I/O thread that carries it waits for a core and the GIL. Empty: not
    measured (nothing more)."""
    wan_hol_bytes: float = 0.0
    """Bytes of a connection's transfers already buffered between the sender's round-robin and the line's
    (socket buffers, the relay's reader) past the relay's read-ahead that a transfer joining that connection
    waits behind; 0: not measured."""
    wan_read_ahead_s: float = 0.0
    """The relay's read-ahead per connection, in seconds of line time (``executor.transport.link.READ_AHEAD_S``:
    read from the code): a connection's bytes up to it wait where the line's round-robin sees them."""
    line_in_pace: bool = False
    """The paces and interference were read off forwards served with the lines' traffic (a calibration
    serve): what a busy line costs a forward is in them, so it is neither charged again nor counted in n."""
    host_pace: tuple[tuple[float, float], ...] = ()
    """(from s, factor) pairs on the simulation's clock (its first arrival at 0): from each time on, every
    charge × factor — the host's speed moving within a run, about the level the paces above give. Empty: a
    steady host. No prediction knows these beforehand: ``bench/bench_serve.py`` reads them off a serve's own
    lone forwards (``served_forwards.pace_timeline``) to tell a host that changed speed mid-serve from the
    simulator's own error."""
    host_pace_prefill: tuple[tuple[float, float], ...] = ()
    """The same for the prefill forwards alone (compute-bound: they move apart from the decode steps); empty:
    ``host_pace`` holds for them too."""
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
        try:
            data = json.loads(Path(path).read_text())
        except OSError as e:
            raise InputError(f"runtime: cannot read {str(path)!r}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise InputError(f"runtime: {str(path)!r} is not JSON: {e}") from None
        return cls.from_dict(data)


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
