"""Measure what the executor's serving runtime adds to the engine's forwards, on this machine.

    python bench/measure_runtime.py [--rounds 3] [--out runtime.json]

Writes the figures of :class:`placer.sim.runtime.ExecutorRuntime` for the bench model
(bench/bench_serve.py's ``MODEL``). The machine may be shared, so work is measured in
CPU seconds (``time.thread_time`` of the thread that does it, ``time.process_time`` of
the whole process), which other processes do not inflate, and each figure is the median
of repeated measurements; how much of the machine is left to us is measured apart, at
the time it matters (:func:`probe_slowdown`, which bench_serve runs around each setup):

- ``cores``: the CPUs this process may run on (``os.sched_getaffinity``).
- ``speedup``: aggregate forwards/s of k engines prefilling at once on k threads of this
  process ÷ one thread's, k = 1…3 (median of ``rounds``): what the instances of one
  process really get from the cores, the GIL included (below 2 on two cores; below 1
  when the threads fight over the GIL).
- ``slowdown``: wall ÷ thread CPU time of a 256-token prefill on one thread, median of 7
  (1 on an idle machine; 3 when other work leaves a third of a core).
- :func:`probe_host`: ``slowdown`` and ``speedup`` again, together and quickly, for the
  moment a run is served (bench_serve probes them around each setup: on a shared machine
  the cores other work leaves change within minutes).
- :func:`probe_forwards`: wall seconds of lone prefill forwards and decode steps at a few
  points of the serve grid (``PACE_POINTS``), now, measured as the profiler measures its
  table (``profiler.model``), in three passes spread over ~15 s: bench_serve divides them by
  the profile's value at the same points — the ``prefill_pace`` / ``decode_pace`` of
  ExecutorRuntime, the machine as it is when a setup is served against the machine the profile
  saw (a shared VM's memory bandwidth and last-level cache change over minutes, and decode is
  memory-bound).
- :func:`probe_interference`: a lone forward of each kind (a PROBE_TOKENS-token prefill, decode
  steps of each of ``INTERFERENCE_BATCHES`` sequences: ``decode@B``) timed while one other engine
  thread runs prefills, decode steps or nothing, in turns: the ``interference`` of ExecutorRuntime
  (a memory-bound decode step beside a prefill took 1.05-1.38x its time alone here, 2026-12-03;
  ``speedup``, measured with prefills, does not see it; a one-sequence step beside another
  decoder 1.06-1.33x, a four-sequence one 0.80-1.26x); and, at the served line's rate, while an
  emulated line in the process carries KV (``line``: the I/O thread's framing and reassembly;
  ``line_bytes_per_s`` says at what rate). Part of probe_host.
- ``kv_export_bytes_per_s`` / ``kv_import_bytes_per_s`` and ``kv_export_fixed_s`` / ``kv_import_fixed_s``:
  ``export_kv`` + ``to_bytes`` on one engine, ``from_bytes`` + ``import_kv`` into another, in thread CPU
  time, of a 1024-token prompt's KV and of a turn's 48 tokens past it (the mean of 15 each: an export's
  cost is bimodal, see :func:`measure_kv`): the line through the two, a rate and a fixed part.
- ``wan_cpu_s_per_byte``: process CPU time of a ``KV_TOKENS``-token ``KVData`` sent through
  an in-process ``LinkEmulator`` between two socket endpoints at the served line's rate
  (``--gbit-per-s``, 200 Mbit/s by default), per byte (median of 3): the I/O thread's work
  while a line is busy (5.5 ns/byte here: 0.14 core at 200 Mbit/s).
- ``wan_frame_bytes``: the transport's frame on a WAN line (``executor.transport.tcp.CHUNK_BYTES``,
  read from the code): the emulated line delays each frame on its own and releases them in order.
- ``wan_latency_s``, ``wan_latency_s_per_byte``, ``wan_latency_beside_s``, ``wan_hol_bytes``: a message's
  time through the sockets and the relay beyond the line's shaping (at the served round trip; more beside
  busy engine threads), and what a KV joining a busy connection waits behind (:func:`measure_line_path`);
  ``wan_read_ahead_s``: the relay's read-ahead, read from the code.
- ``request_overhead_s`` and ``token_stream_s``: lone requests (64 fresh tokens) through a
  same-datacenter LocalCluster (P and D, tcp transport), one at a time, with 8 and with 40
  output tokens: the process CPU time of each request less the engine's own CPU time for
  its prefill, export, import and decode steps (measured on one thread); the rest is
  ``request_overhead_s`` (router, orders, control messages). ``token_stream_s`` is what lies on the
  decoder's steps' path per output token: its worker thread's CPU time (``RoleWorker.thread_cpu_s``)
  less its engine's forwards, per token between the two output lengths (sending the ``Tokens``
  message, the worker loop) — 50 us here, 2026-12-05. Until then it was the process's CPU growth
  per token less a decode step timed apart: the I/O and router threads' share too (~40 us, beside
  the next step on the other core), and the difference of two noisy medians, so it landed anywhere
  in 0.1-1 ms from run to run and the simulated TPOT came out 8-38 % long (bench_serve run w).
- ``ttft_overhead_s``: the part of it on the first token's path, from the same lone requests with 8
  output tokens: the executor's own record of each (``RequestRecord.extra``), TTFT less the engine's
  prefill, KV export and KV import (medians; the hops between the router, P and D, and the router's
  dispatch: 1.3-1.9 ms against 5-8 ms of CPU overhead here, 2026-12-04).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from executor.engine import Engine, EngineConfig, SamplingParams  # noqa: E402
from executor.engine.kv_payload import KVPayload  # noqa: E402
from executor.transport.tcp import CHUNK_BYTES  # noqa: E402

from bench.serve_trace import BLOCK, MODEL  # noqa: E402

PROBE_TOKENS = 256
KV_TOKENS = 1024
KV_TAIL_TOKENS = 48  # a turn's new tokens past its cached conversation (the bench trace's: about 45)
LONE_PROMPT_TOKENS = 64
# (new tokens, cached context) / (batch, context per sequence): grid points of `--grid serve`, near the
# bench trace's forwards (new conversations ~1000 tokens after the cached system prompt, turns ~40
# tokens after ~1400 cached; decoders stepping 1-8 sequences at ~1000-1500 tokens)
PACE_POINTS = {"prefill": ((1024, 0), (64, 2048)), "decode": ((1, 1024), (4, 1024))}
# decode steps timed beside a neighbour, at batch 1 (a decoder of the bench trace most of the time) and 4 (under
# load), of INTERFERENCE_CONTEXT tokens each: a small batch is more Python (the GIL) per second, a big one more memory
INTERFERENCE_BATCHES = (1, 4)
INTERFERENCE_CONTEXT = 1024
NEIGHBOUR_DECODE = (2, 1024)  # (batch, context): the neighbour decoder's steps (the served median batch)
LONE_OUTPUTS = (8, 40)
LONE_REQUESTS = 8
LATENCY_SIZES = (256, 1 << 20, 4 << 20)  # bytes of the lone messages measure_line_path times
HOL_BIG_BYTES, HOL_SMALL_BYTES = 8 << 20, 3 << 19  # big: beyond the relay's read-ahead; small: a turn's KV
HOL_AFTER_S = 0.1  # the small one goes while the big one is crossing
BESIDE_NEIGHBOURS = ("decode", "prefill")  # engine threads busy beside the small messages, one more each time
BESIDE_REPS = 25
LINE_KV_TOKENS = 256  # KVData the probe's busy line carries (8 MiB: 0.34 s at 200 Mbit/s)


def _config() -> EngineConfig:
    # 160 blocks = 2560 tokens = 80 MiB of KV: room for the largest prompt measured here
    return EngineConfig(backend="torch", block_size=BLOCK, num_blocks=160, max_prefill_tokens=4096)


def _engine(seed: int = 0) -> Engine:
    return Engine.from_seed(MODEL, _config(), seed=seed, device="cpu")


def _prompt(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(256) for _ in range(n)]


def probe_slowdown(reps: int = 7) -> float:
    """Wall ÷ thread CPU time of one prefill forward now (≥ 1): how much of a core other work leaves us."""
    eng = _engine(9)
    rng = random.Random(9)
    ratios = []
    for i in range(reps + 1):
        prompt = _prompt(rng, PROBE_TOKENS)
        w0, c0 = time.perf_counter(), time.thread_time()
        res = eng.prefill(prompt)
        w, c = time.perf_counter() - w0, time.thread_time() - c0
        eng.finish(res.request)
        if i and c > 0:
            ratios.append(w / c)
    return max(1.0, statistics.median(ratios))


def forwards_per_s(k: int, window_s: float = 1.0) -> float:
    """Aggregate forwards/s of k engines prefilling PROBE_TOKENS-token prompts at once, one thread each."""
    import threading

    engines = [_engine(i) for i in range(k)]
    counts = [0] * k
    start, stop = threading.Barrier(k + 1), threading.Event()

    def work(i: int) -> None:
        rng = random.Random(i)
        start.wait()
        while not stop.is_set():
            engines[i].finish(engines[i].prefill(_prompt(rng, PROBE_TOKENS)).request)
            counts[i] += 1

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(k)]
    for th in threads:
        th.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(window_s)
    done, elapsed = sum(counts), time.perf_counter() - t0
    stop.set()
    for th in threads:
        th.join()
    return done / elapsed


def probe_forwards(reps: int = 3, rounds: int = 3) -> dict[str, list[list[float]]]:
    """Wall seconds of a lone forward at each of PACE_POINTS now: [[size, context, seconds], …] per
    phase, timed as the profiler times its table, ``rounds`` passes over the points with ``reps``
    timed runs each (after a warm-up), the median of a point's runs pooled over the passes.

    One pass is a snapshot of a few tenths of a second per phase; on a shared VM a burst lasts
    seconds, and eight single-pass probes taken back to back read a point at 0.78-1.78x the
    profile (2026-12-03): passes spread over ~15 s (three), pooled, put the probe inside the spread of
    the served forwards' own pace (bench_serve's "pace of the served forwards")."""
    import torch

    from profiler.model import decode_point, prefill_point

    most = max(b * (c + 16) for b, c in PACE_POINTS["decode"]) + max(t + c for t, c in PACE_POINTS["prefill"])
    eng = Engine.from_seed(MODEL, EngineConfig(backend="torch", block_size=BLOCK, num_blocks=2 * most // BLOCK + 64,
                                               max_prefill_tokens=4096), seed=5, device="cpu")
    rng, cpu = random.Random(5), torch.device("cpu")
    runs: dict[tuple[str, int, int], list[float]] = {}
    for _ in range(rounds):
        for t, c in PACE_POINTS["prefill"]:
            prefill_point(torch, cpu, eng, rng, t, c, reps, "wall", runs.setdefault(("prefill", t, c), []))
        for b, c in PACE_POINTS["decode"]:
            decode_point(torch, cpu, eng, rng, b, c, reps, "wall", runs.setdefault(("decode", b, c), []))
    return {phase: [[a, b, statistics.median(runs[phase, a, b])] for a, b in PACE_POINTS[phase]]
            for phase in ("prefill", "decode")}


class _Neighbour:
    """One engine thread that runs forwards of one kind while ``on`` is set (a decoder restarts its
    batch every 128 steps, so its context stays near NEIGHBOUR_DECODE's). With ``stream`` (an
    endpoint and a peer's name), a decoder serves as the executor's do: after each step it sends one
    ``Tokens`` message per sequence to that peer (roles/md.py, rld.py) — Python on its thread and on
    the I/O thread between its forwards, which the GIL makes the timed forward wait for."""

    def __init__(self, kind: str, seed: int, stream: tuple | None = None):
        import threading

        self.kind, self.on, self.stop, self.idle = kind, threading.Event(), threading.Event(), threading.Event()
        self.stream = stream
        if stream is not None:
            from executor.transport.messages import Tokens

            self.message = Tokens
        self.forwards = 0
        batch, ctx = NEIGHBOUR_DECODE
        self.engine = Engine.from_seed(MODEL, EngineConfig(backend="torch", block_size=BLOCK,
                                                           num_blocks=batch * (ctx + 256) // BLOCK + 16,
                                                           max_prefill_tokens=4096), seed=seed, device="cpu")
        self.rng = random.Random(seed)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        eng, batch, reqs, steps = self.engine, NEIGHBOUR_DECODE[0], [], 0
        while not self.stop.is_set():
            if not self.on.is_set():
                self.idle.set()  # no forward in flight
            if not self.on.wait(0.05):
                continue
            self.idle.clear()
            if self.kind == "prefill":
                eng.finish(eng.prefill(_prompt(self.rng, PROBE_TOKENS)).request)
            else:
                if steps % 128 == 0:
                    for r in reqs:
                        eng.finish(r)
                    reqs = [eng.prefill(_prompt(self.rng, NEIGHBOUR_DECODE[1])).request for _ in range(batch)]
                tokens = eng.decode_step(reqs)
                steps += 1
                if self.stream is not None:
                    endpoint, peer = self.stream
                    for i, token in enumerate(tokens):
                        endpoint.send(peer, self.message(f"n{i}", steps, [token], "neighbour"))
            self.forwards += 1

    def start(self) -> None:
        """Run, and return once it has done a forward (its kind, not its set-up, is what is timed beside)."""
        self.on.set()
        begun = self.forwards
        while self.forwards < begun + 1 + (self.kind == "decode") and self.thread.is_alive():
            time.sleep(0.002)

    def pause(self) -> None:
        """Stop, and return once its forward in flight has ended (a decode step ~50 ms, a prefill ~60 ms)."""
        self.on.clear()
        self.idle.wait(5.0)

    def close(self) -> None:
        self.stop.set()
        self.on.set()
        self.thread.join()


class _Line:
    """An emulated WAN line in this process carrying KV at ``gbit_per_s`` while ``on`` is set: the I/O
    thread's framing, relaying and reassembly of a busy line, as a neighbour of the timed forwards.
    LINE_KV_TOKENS-token KVData messages, two in flight, so the line never waits for a sender."""

    def __init__(self, gbit_per_s: float, rtt_ms: float = 30.0):
        import threading

        self.on, self.stop = threading.Event(), threading.Event()
        self.line, self.ends, delivered = _line_pair(gbit_per_s, rtt_ms)
        self.in_flight = threading.Semaphore(2)
        delivered.append(self.in_flight.release)
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from executor.transport.messages import KVData

        size = LINE_KV_TOKENS * MODEL.kv_bytes_per_token
        while not self.stop.is_set():
            if not self.on.wait(0.05) or not self.in_flight.acquire(timeout=0.05):
                continue
            self.sent += 1
            self.ends["src"].send("dst", KVData(f"l{self.sent}", 0, LINE_KV_TOKENS, 1, 0, bytes(size)),
                                  deadline_s=60)

    def start(self) -> None:
        """Start sending, and return once the line has carried bytes for a while (its queue is full)."""
        self.on.set()
        time.sleep(0.3)

    def pause(self) -> None:
        """Stop sending, and return once what is in flight has crossed (~0.4 s at 200 Mbit/s)."""
        self.on.clear()
        got = sum(self.in_flight.acquire(timeout=10) for _ in range(2))
        for _ in range(got):
            self.in_flight.release()

    def close(self) -> None:
        self.stop.set()
        for ep in self.ends.values():
            ep.close()
        self.line.close()


def _line_pair(gbit_per_s: float, rtt_ms: float, senders: tuple[str, ...] = ("src",)):
    """An in-process ``LinkEmulator`` between socket endpoints, ``senders`` (``src``) in dc-a and ``dst`` in
    dc-b; returns (line, endpoints, the callback list ``dst`` calls on each message)."""
    from executor.transport.base import PeerInfo
    from executor.transport.link import LinkEmulator
    from executor.transport.shaping import LinkShape
    from executor.transport.tcp import Directory, TcpEndpoint

    directory = Directory()
    line = LinkEmulator("dc-a", "dc-b", LinkShape(gbit_per_s, rtt_ms=rtt_ms))
    address = line.start()
    directory.add_link("dc-a", "dc-b", address)
    directory.add_link("dc-b", "dc-a", address)
    ends = {}
    for name, dc in (*((n, "dc-a") for n in senders), ("dst", "dc-b")):
        ends[name] = TcpEndpoint(name, dc, directory)
        directory.add(PeerInfo(name, dc, ends[name].start()))
    callbacks: list = []
    ends["dst"].set_handler(lambda src, msg: [cb() for cb in callbacks])
    return line, ends, callbacks


def probe_interference(rounds: int = 4, reps: int = 3, gbit_per_s: float = 0.0) -> dict[str, dict[str, float]]:
    """What one other engine thread costs a lone forward: ``{kind: {beside: factor}}``, the median
    wall seconds of ``kind``'s forward (a PROBE_TOKENS-token prefill; ``decode@B``: a decode step of
    B sequences of INTERFERENCE_CONTEXT tokens, for each B of INTERFERENCE_BATCHES) while a neighbour
    thread runs ``beside`` forwards (decode steps at NEIGHBOUR_DECODE; with ``gbit_per_s``, streaming
    a ``Tokens`` message per sequence per step over an emulated line, as MD streams to the router),
    ÷ the median with no neighbour. A small batch's step is mostly Python between small torch calls,
    so it waits for the GIL beside another thread more than a big one, which is mostly memory
    traffic. Alone and each neighbour take turns, ``reps`` forwards each, ``rounds`` times, so the
    machine's drift over the probe falls on all of them alike. With ``gbit_per_s``, one more
    neighbour, ``line``: an emulated WAN line in the process carrying KV at that rate (:class:`_Line`;
    2026-12-03: a decode step took 1.19x its time alone beside a busy 200 Mbit/s line, its thread
    CPU time 1.14x — the I/O thread's framing and reassembly cost the engine's thread more than the
    share of a core they take). A streaming neighbour decoder read 1.07-1.27x for a one-sequence
    step and 1.11-1.26x for a four-sequence one (three probes; served pdd decoders beside each
    other ran 1.88 wall seconds per CPU second: more than this probe shows)."""
    most = max(INTERFERENCE_BATCHES)
    eng = Engine.from_seed(MODEL, EngineConfig(backend="torch", block_size=BLOCK,
                                               num_blocks=2 * most * (INTERFERENCE_CONTEXT + 64) // BLOCK + 32,
                                               max_prefill_tokens=4096), seed=7, device="cpu")
    rng = random.Random(7)
    reqs = [eng.prefill(_prompt(rng, INTERFERENCE_CONTEXT)).request for _ in range(most)]

    def forward(kind: str) -> float:
        if kind.startswith("decode@"):
            batch = reqs[:int(kind[7:])]
            t0 = time.perf_counter()
            eng.decode_step(batch)
            return time.perf_counter() - t0
        prompt = _prompt(rng, PROBE_TOKENS)
        t0 = time.perf_counter()
        res = eng.prefill(prompt)
        seconds = time.perf_counter() - t0
        eng.finish(res.request)
        return seconds

    timed = ("prefill", *(f"decode@{b}" for b in INTERFERENCE_BATCHES))
    stream = _line_pair(gbit_per_s, 30.0) if gbit_per_s else None  # the decoder streams to a far router
    neighbours = {"prefill": _Neighbour("prefill", 20),
                  "decode": _Neighbour("decode", 21, (stream[1]["src"], "dst") if stream else None)}
    if gbit_per_s:
        neighbours["line"] = _Line(gbit_per_s)
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for kind in timed:  # warm-up
            forward(kind)
        for _ in range(rounds):
            for beside in ("", *neighbours):
                if beside:
                    neighbours[beside].start()
                for kind in timed:
                    times.setdefault((kind, beside), []).extend(forward(kind) for _ in range(reps))
                if beside:
                    neighbours[beside].pause()
    finally:
        for n in neighbours.values():
            n.close()
        if stream:
            for ep in stream[1].values():
                ep.close()
            stream[0].close()
        for r in reqs:
            eng.finish(r)
    return {kind: {beside: round(statistics.median(times[kind, beside]) / statistics.median(times[kind, ""]), 3)
                   for beside in neighbours} for kind in timed}


def probe_host(window_s: float = 0.6, most: int = 3, repeats: int = 3, gbit_per_s: float = 0.0) -> dict:
    """The host as it is now: one thread's ``slowdown`` and the ``speedup`` of k = 1…most engine
    threads (aggregate forwards/s ÷ one thread's, each over ``window_s``), measured together.

    The simulator charges n concurrent forwards ``slowdown × n / speedup(n)`` wall seconds per
    CPU second (:class:`placer.sim.runtime.Host`): both factors describe the cores other work
    leaves us, so they must be measured at the same time as each other and as the serving they
    describe (bench_serve probes before and after each setup). A speedup measured minutes apart
    under another load mixes that load into the GIL's share: on a shared 2-core machine it read
    0.70-0.80 for two threads beside a one-thread slowdown of 1.0-1.3 probed at serve time,
    charging two forwards 2.5x instead of the ~1.3x one loaded core gives.

    Each k's throughput is the best of ``repeats`` windows, taken in turn (1, 2, …, most, 1, 2, …):
    a burst of other work only ever lowers a window's count, and one disturbed window read
    [1, 1.22, 2.07] for 1-3 threads on two cores (3 threads cannot do 2.07x; 2 did 1.89x minutes
    before) — a noise that decided the simulator's step times for a whole setup.

    With ``gbit_per_s`` (the served line's rate), the interference includes a busy line's.
    """
    slowdown = probe_slowdown(reps=5)
    best = {k: 0.0 for k in range(1, most + 1)}
    for _ in range(repeats):
        for k in best:
            best[k] = max(best[k], forwards_per_s(k, window_s))
    speedup = [1.0] + [round(best[k] / best[1], 3) for k in range(2, most + 1)]
    return {"slowdown": round(slowdown, 3), "speedup": speedup, "forwards": probe_forwards(),
            "interference": probe_interference(rounds=6, gbit_per_s=gbit_per_s)}


def measure_speedup(rounds: int, most: int = 3) -> list[float]:
    """Aggregate throughput of k concurrent engine threads in this process ÷ one thread's, k = 1…most
    (medians over rounds): the cores AND the GIL the instances of one process share."""
    per_k: dict[int, list[float]] = {k: [] for k in range(1, most + 1)}
    for _ in range(rounds):
        one = forwards_per_s(1)
        for k in range(1, most + 1):
            per_k[k].append(forwards_per_s(k) / one if k > 1 else 1.0)
    return [round(statistics.median(v), 3) for v in per_k.values()]


def measure_kv(reps: int = 15) -> dict:
    """A KV export's and import's cost as a fixed part and a rate: ``export_kv`` + ``to_bytes`` on one engine,
    ``from_bytes`` + ``import_kv`` into another, in thread CPU time, for a KV_TOKENS-token prompt's whole KV
    and for a turn's KV_TAIL_TOKENS new tokens past it (the consumer caching the prompt, as MD pulls only
    what its radix cache lacks); the line through the two means of ``reps`` each, the expected cost the
    simulator charges every export and import.

    The fixed part: served turns' 1.5 MB KV took 0.4-0.7 ms to export and 0.6-1.4 ms to import where the
    rate alone gives 0.25 (bench_serve runs h-z2, 2026-12-05: a + b x over each setup's 102 requests gave
    a = 0.25-0.6 ms for exports and 0.56-1.28 ms for imports): the payload's header and token ids, the
    radix cache's walk, the blocks' allocation, the request's creation.

    An export's cost was bimodal until 2026-12-05: 5-8 GB/s when its copy landed on pages the process
    already held and 1.1-2.3 GB/s when it faulted in fresh ones (about 3 us a page on this Firecracker
    guest), moving between the two over consecutive exports of one size, so a median of 9 landed on
    1118-1275 MB/s in some runs and 5774 MB/s in others. The cause was glibc's malloc unmapping every
    freed payload (executor/engine/memory.py); the engine now keeps freed memory, and an export goes
    6.3 GB/s run after run (5.1 GB/s, and in other runs 1.3, without). The mean stays: a first export
    into a heap that has not grown yet still pays the faults once."""
    src, dst = _engine(0), _engine(1)
    rng = random.Random(3)
    timed: dict[str, dict[str, list[float]]] = {kind: {"tail": [], "whole": []} for kind in ("export", "import")}
    sizes: dict[str, list[int]] = {"tail": [], "whole": []}
    for _ in range(reps):
        prompt = _prompt(rng, KV_TOKENS)
        for part, tokens in (("whole", prompt), ("tail", prompt + _prompt(rng, KV_TAIL_TOKENS))):
            res = src.prefill(tokens)
            start = dst.cached_prefix_len(tokens)  # the whole prompt's blocks, for the turn past it
            t0 = time.thread_time()
            data = src.export_kv(res.request, start, len(tokens)).to_bytes()
            timed["export"][part].append(time.thread_time() - t0)
            t0 = time.thread_time()
            req = dst.import_kv([*tokens, res.first_token], KVPayload.from_bytes(data, copy=False),
                                SamplingParams(max_new_tokens=4, stop_at_eos=False), num_prompt_tokens=len(tokens))
            timed["import"][part].append(time.thread_time() - t0)
            sizes[part].append(len(data))
            dst.finish(req)
            src.finish(res.request)
    small, big = statistics.mean(sizes["tail"]), statistics.mean(sizes["whole"])
    out: dict = {}
    for kind, by_part in timed.items():
        t_small, t_big = statistics.mean(by_part["tail"]), statistics.mean(by_part["whole"])
        per_byte = (t_big - t_small) / (big - small)
        out[f"{kind}_bytes_per_s"] = 1 / per_byte if per_byte > 0 else big / t_big
        out[f"{kind}_fixed_s"] = max(0.0, t_small - small * per_byte) if per_byte > 0 else 0.0
        out[f"{kind}_mean_s"] = {"tail": t_small, "whole": t_big}
    out["bytes"], out["tail_bytes"] = round(big), round(small)
    return out


def measure_wan_cpu(reps: int = 3, gbit_per_s: float = 0.2) -> float:
    """Process CPU seconds per byte of one KV_TOKENS-token KVData sent through an in-process
    ``LinkEmulator`` at ``gbit_per_s`` (median of ``reps``): the I/O thread's framing, relaying,
    reassembling and decoding, what a busy WAN line costs the serving process besides the engines'
    threads. The sender's ``encode`` (on its worker thread) is included: a few percent of the total.
    Measure at the rate to be served: a slower line paces frames one per wake-up of the I/O loop,
    a faster one lets it batch them (2026-12-02: 5.5 ns/byte at 200 Mbit/s, 4.3 at 1 Gbit/s; the
    I/O thread's own clock over a served cross-dc run read 7.2, control messages included)."""
    import threading

    from executor.transport.messages import KVData

    line, ends, delivered = _line_pair(gbit_per_s, rtt_ms=2.0)
    got = threading.Event()
    delivered.append(got.set)
    size = KV_TOKENS * MODEL.kv_bytes_per_token
    per_byte = []
    try:
        for i in range(reps + 1):  # the first opens the connections
            got.clear()
            time.sleep(0.05)
            c0 = time.process_time()
            ends["src"].send("dst", KVData(f"r{i}", 0, KV_TOKENS, 1, 0, bytes(size)), deadline_s=60)
            if not got.wait(60):
                raise RuntimeError("the KV did not cross the emulated line")
            if i:
                per_byte.append((time.process_time() - c0) / size)
    finally:
        for ep in ends.values():
            ep.close()
        line.close()
    return statistics.median(per_byte)


def measure_line_path(reps: int = 7, gbit_per_s: float = 0.2, rtt_ms: float = 30.0) -> dict[str, float]:
    """What a message across an in-process ``LinkEmulator`` (the served line's rate and round trip, no jitter)
    takes beyond the line's own time (its bytes at the rate, one way), between two socket endpoints as the
    serving process has them (medians of ``reps``):

    - ``wan_latency_s`` and ``wan_latency_s_per_byte``: a lone message's transit less its bytes' line time,
      at LATENCY_SIZES (a Tokens-sized message, a KV of 1-4 MiB), fitted as fixed + per byte (least squares):
      the relay's wake-up and write, the receiver's read, reassembly and decode (2026-12-05: 0.7-2 ms +
      0.3-0.9 ns/B over three runs; 44 ms for a lone 42 MB KV). At the served round trip, not none: the relay
      holds each frame until its release and sleeps meanwhile, so its timer's wake-up is in the path
      (a 256 B message 0.8-1.5 ms beyond one way at 30 ms, 0.56-0.66 ms on a line without delay).
    - ``wan_hol_bytes``: a HOL_SMALL_BYTES KV sent HOL_AFTER_S after a big one (the relay's read-ahead
      and HOL_BIG_BYTES more: the relay's queue for the connection full, its sockets too), both on one
      connection, took longer than beside the same big one sent from another endpoint (a connection of its
      own; processor sharing, as the line's round-robin shares it): the difference × the line's rate is what
      was buffered ahead of it on its connection past the relay's read-ahead (the sender's and the relay's
      socket buffers, the relay's reader) and crossed before the round-robin saw it (2026-12-05: 16-18 ms at
      200 Mbit/s, 0.40-0.45 MB over three runs; served cross-dc turns whose KV shared the line with a new
      conversation's took 13-26 ms more than fair sharing). With the big one's rest inside the read-ahead,
      nothing waits (an 8 MiB one: 0.02 MB).
    - ``wan_read_ahead_s``: the relay's read-ahead in seconds of line time (``executor.transport.link.
      READ_AHEAD_S``, read from the code).
    - ``wan_latency_beside_s``: what a small message takes more, on the mean, while 1, 2 … engine threads
      run forwards in the process (BESIDE_NEIGHBOURS: a decoder streaming its Tokens back across the line,
      then a prefill too, as MD and P do): the I/O thread, which relays, reads and decodes every message,
      waits for a core and the GIL (2026-12-05, 256 B at 30 ms: 0.8-0.9 ms alone, +0.4 beside a decoder,
      +1.2 beside a decoder and a prefill, +3.0 beside three; served cross-dc orders crossed in 18.1 ms
      against 16.5 modelled without it).
    """
    import threading

    from executor.transport.link import READ_AHEAD_S
    from executor.transport.messages import KVData

    rate = gbit_per_s * 1e9 / 8
    big = int(rate * READ_AHEAD_S) + HOL_BIG_BYTES
    line, ends, _ = _line_pair(gbit_per_s, rtt_ms=rtt_ms, senders=("src", "src2"))
    one_way = rtt_ms / 2000
    landed: dict[str, float] = {}
    cond = threading.Condition()

    def on_message(_src: str, msg) -> None:
        with cond:
            landed[msg.request_id] = time.monotonic()
            cond.notify_all()

    ends["dst"].set_handler(on_message)

    def send(sender: str, rid: str, size: int) -> None:
        ends[sender].send("dst", KVData(rid, 0, 1, 1, 0, bytes(size)), deadline_s=60)

    def wait(rid: str) -> float:
        with cond:
            if not cond.wait_for(lambda: rid in landed, 60):
                raise RuntimeError("a message did not cross the emulated line")
            return landed[rid]

    def lone_small(rid: str) -> float:
        time.sleep(0.03)
        t0 = time.monotonic()
        send("src", rid, LATENCY_SIZES[0])
        return wait(rid) - t0 - one_way - LATENCY_SIZES[0] / rate

    try:
        send("src", "warm", 1024)
        send("src2", "warm2", 1024)
        wait("warm2")
        lone: dict[int, list[float]] = {size: [] for size in LATENCY_SIZES}
        hol: dict[str, list[float]] = {"src": [], "src2": []}
        for i in range(reps):
            for size in LATENCY_SIZES:
                time.sleep(0.1 + 2 * one_way)  # the I/O loop idle again
                t0 = time.monotonic()
                send("src", f"l{i}-{size}", size)
                lone[size].append(wait(f"l{i}-{size}") - t0 - one_way - size / rate)
            for sender in hol:
                time.sleep(0.05)
                send("src", f"b{i}{sender}", big)
                time.sleep(HOL_AFTER_S)
                t0 = time.monotonic()
                send(sender, f"s{i}{sender}", HOL_SMALL_BYTES)
                hol[sender].append(wait(f"s{i}{sender}") - t0)
                wait(f"b{i}{sender}")
        ends["src"].set_handler(lambda _src, _msg: None)  # the neighbour decoders' Tokens
        alone = [lone_small(f"a{i}") for i in range(BESIDE_REPS)]
        beside = []
        neighbours = [_Neighbour(kind, seed, stream=(ends["dst"], "src") if kind == "decode" else None)
                      for seed, kind in enumerate(BESIDE_NEIGHBOURS, start=11)]
        try:
            for k, n in enumerate(neighbours, start=1):
                n.start()
                beside.append([lone_small(f"n{k}-{i}") for i in range(BESIDE_REPS)])
        finally:
            for n in neighbours:
                n.close()
    finally:
        for ep in ends.values():
            ep.close()
        line.close()
    extra = [max(0.0, statistics.fmean(b) - statistics.fmean(alone)) for b in beside]
    xs = list(LATENCY_SIZES)
    ys = [statistics.median(lone[x]) for x in xs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    slope = max(0.0, slope)
    same, other = statistics.median(hol["src"]), statistics.median(hol["src2"])
    return {"wan_latency_s": max(0.0, my - slope * mx), "wan_latency_s_per_byte": slope,
            "wan_hol_bytes": max(0.0, (same - other) * rate), "wan_read_ahead_s": READ_AHEAD_S,
            "wan_latency_beside_s": [round(x, 6) for x in extra],
            "lone_s_beyond_line": dict(zip(map(str, xs), ys)), "hol_same_connection_s": same,
            "hol_other_connection_s": other}


def engine_times(reps: int = 9) -> tuple[float, float]:
    """Thread CPU seconds of (a LONE_PROMPT_TOKENS-token prefill, a decode step at batch 1), medians."""
    eng = _engine(0)
    rng = random.Random(4)
    pre, step = [], []
    for _ in range(reps):
        t0 = time.thread_time()
        res = eng.prefill(_prompt(rng, LONE_PROMPT_TOKENS))
        pre.append(time.thread_time() - t0)
        for _ in range(5):
            t0 = time.thread_time()
            eng.decode_step([res.request])
            step.append(time.thread_time() - t0)
        eng.finish(res.request)
    return statistics.median(pre), statistics.median(step)


def lone_request_cpu_s(outputs: int, n: int = LONE_REQUESTS) -> tuple[float, float, float]:
    """Medians of one lone request through a same-datacenter P-D cluster: (its process CPU seconds, the
    wall seconds its first token took beyond the engine's prefill, KV export and KV import, the CPU
    seconds of the decoder's worker thread beyond its engine's forwards — what lies on its steps' path)."""
    from executor.cluster import LocalCluster
    from executor.config import ServingConfig
    from executor.placement import InstanceSpec
    from executor.routing import Pipeline, RoutingPolicy

    specs = [InstanceSpec("p0", "P", "dc-a", "CPU"), InstanceSpec("d0", "D", "dc-a", "CPU")]
    config = ServingConfig(routing=RoutingPolicy(allowed=frozenset({Pipeline.P_D})), heartbeat_s=None,
                           request_timeout_s=120)
    rng = random.Random(5)
    cpu, path, beyond = [], [], []
    with LocalCluster(specs, MODEL, _config(), config, transport="tcp") as cluster:
        decoder = cluster.instances["d0"].worker
        for i in range(n + 1):  # the first warms up
            time.sleep(0.1)  # idle loops settle
            decoder.engine.forward_log.clear()
            c0, d0 = time.process_time(), decoder.thread_cpu_s()
            stream = cluster.router.submit(_prompt(rng, LONE_PROMPT_TOKENS),
                                           SamplingParams(max_new_tokens=outputs, stop_at_eos=False))
            if not stream.closed.wait(120) or stream.error:
                raise RuntimeError(f"lone request {i} failed: {stream.error}")
            if i:
                cpu.append(time.process_time() - c0)
                r = stream.record
                path.append(r.ttft_s - sum(r.extra.get(k, 0.0) for k in ("prefill_s", "md_p_export_s", "md_import_s")))
                d1 = decoder.thread_cpu_s()
                if d0 is not None and d1 is not None:
                    log = decoder.engine.forward_log
                    beyond.append(d1 - d0 - sum(f.cpu_s for kind in ("decode", "extend") for f in log.records(kind)))
    return statistics.median(cpu), statistics.median(path), statistics.median(beyond) if beyond else math.nan


def measure_runtime(rounds: int = 3, gbit_per_s: float = 0.2, rtt_ms: float = 30.0) -> dict:
    """The ExecutorRuntime figures (and the raw measurements behind them); ``gbit_per_s``: the rate of
    the line that will be served (the I/O thread's cost per byte depends on it, see measure_wan_cpu)."""
    import torch

    torch.set_num_threads(1)  # as bench_serve serves
    sys.setswitchinterval(0.001)
    started = time.perf_counter()
    slowdown = probe_slowdown()
    speedup = measure_speedup(rounds)
    interference = probe_interference(max(rounds, 4), gbit_per_s=gbit_per_s)
    kv = measure_kv()
    prefill_s, step_s = engine_times()
    wan_cpu = measure_wan_cpu(gbit_per_s=gbit_per_s)
    path = measure_line_path(gbit_per_s=gbit_per_s, rtt_ms=rtt_ms)
    short, long = LONE_OUTPUTS
    lone = [lone_request_cpu_s(short) for _ in range(rounds)]
    lone_long = [lone_request_cpu_s(long) for _ in range(rounds)]
    c_short = statistics.median(c for c, _, _ in lone)
    c_long = statistics.median(c for c, _, _ in lone_long)
    per_token = (c_long - c_short) / (long - short)
    # on the decoder's thread, beside its steps: the Tokens message each step sends per sequence. Its thread's
    # own CPU less its engine's forwards, per extra output token (the rest of the process's CPU per token runs
    # on the I/O and router threads, beside the next step; where the platform has no thread clock, all of it)
    on_thread = statistics.median((x_long - x_short) / (long - short)
                                  for (_, _, x_short), (_, _, x_long) in zip(lone, lone_long))
    stream = on_thread if math.isfinite(on_thread) else per_token - step_s
    lone_kv = LONE_PROMPT_TOKENS * MODEL.kv_bytes_per_token
    overhead = (c_short - prefill_s - kv["export_fixed_s"] - lone_kv / kv["export_bytes_per_s"] - kv["import_fixed_s"]
                - lone_kv / kv["import_bytes_per_s"] - (short - 1) * per_token)
    return {
        "cores": len(os.sched_getaffinity(0)),
        "slowdown": round(slowdown, 3),
        "speedup": speedup,
        "interference": interference,
        "line_bytes_per_s": gbit_per_s * 1e9 / 8,
        "request_overhead_s": round(max(0.0, overhead), 5),
        "ttft_overhead_s": round(statistics.median(p for _, p, _ in lone), 5),
        "kv_export_bytes_per_s": round(kv["export_bytes_per_s"]),
        "kv_import_bytes_per_s": round(kv["import_bytes_per_s"]),
        "kv_export_fixed_s": round(kv["export_fixed_s"], 6),
        "kv_import_fixed_s": round(kv["import_fixed_s"], 6),
        "token_stream_s": round(max(0.0, stream), 6),
        "wan_cpu_s_per_byte": float(f"{wan_cpu:.4g}"),
        "wan_frame_bytes": CHUNK_BYTES,
        "wan_latency_s": round(path["wan_latency_s"], 6),
        "wan_latency_s_per_byte": float(f"{path['wan_latency_s_per_byte']:.4g}"),
        "wan_hol_bytes": round(path["wan_hol_bytes"]),
        "wan_read_ahead_s": path["wan_read_ahead_s"],
        "wan_latency_beside_s": path["wan_latency_beside_s"],
        "source": f"bench/measure_runtime.py on {platform.node()} ({platform.machine()}), "
                  f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z, {rounds} rounds",
        "measurements": {
            "kv_bytes": kv["bytes"], "kv_tail_bytes": kv["tail_bytes"], "kv_export_mean_s": kv["export_mean_s"],
            "kv_import_mean_s": kv["import_mean_s"], "wan_cpu_line_gbit_per_s": gbit_per_s,
            "engine_prefill_64_cpu_s": prefill_s,
            "engine_decode_step_b1_cpu_s": step_s,
            f"lone_request_cpu_s_{short}_tokens": c_short, f"lone_request_cpu_s_{long}_tokens": c_long,
            "process_cpu_s_per_output_token": per_token,
            "line_path": {k: v for k, v in path.items() if not k.startswith("wan_")},
            "seconds": round(time.perf_counter() - started, 1),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gbit-per-s", type=float, default=0.2, help="rate of the line to be served (bench_serve's)")
    ap.add_argument("--rtt-ms", type=float, default=30.0, help="round trip of the line to be served (bench_serve's)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    figures = measure_runtime(args.rounds, args.gbit_per_s, args.rtt_ms)
    text = json.dumps(figures, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
