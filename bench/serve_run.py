"""bench_serve's serving: one setup serves the trace on the executor's real engines over the emulated line.

in:  a setup's name (``serve_trace.setups``), the trace, the line (``LinkShape``), the engine config, a seed
out: :func:`serve` — per request TTFT/TPOT, phases, pipelines, handoffs (``serve_handoff``), WAN bytes and every
     served forward (``forward_log``); :func:`calibrated_serve` — the calibration trace then the measured one,
     served again while the host's own pace moved between them; :func:`replay`, :func:`warm_up`.
"""

from __future__ import annotations

import math
import random
import sys
import time

from bench import serve_handoff, served_forwards
from bench.serve_trace import MODEL, TraceRequest, setups, shared_prefix
from executor.cluster import LocalCluster
from executor.config import ServingConfig
from executor.engine import EngineConfig, SamplingParams
from executor.handoff import HandoffPolicy
from executor.transport.shaping import LinkShape


def replay(router, trace: list[TraceRequest]) -> tuple[list, list[float]]:
    """Submit the trace: lone requests at their times, each conversation's next turn after its answer."""
    streams: list = [None] * len(trace)
    arrivals = [math.nan] * len(trace)
    nxt = {(r.conv, r.turn): i for i, r in enumerate(trace) if r.conv >= 0}
    due = [(r.t_s, i) for i, r in enumerate(trace) if r.conv < 0 or r.turn == 0]
    start = time.monotonic()
    while any(s is None or not s.closed.is_set() for s in streams):
        now = time.monotonic() - start
        due.sort()
        while due and due[0][0] <= now:
            _, i = due.pop(0)
            req = trace[i]
            arrivals[i] = time.monotonic() - start
            streams[i] = router.submit(req.prompt, SamplingParams(max_new_tokens=req.max_tokens, stop_at_eos=False))
        for i, s in enumerate(streams):
            req = trace[i]
            if s is not None and s.closed.is_set() and req.conv >= 0 and (req.conv, req.turn + 1) in nxt:
                j = nxt.pop((req.conv, req.turn + 1))
                due.append((time.monotonic() - start + trace[j].t_s, j))
        if now > 600:
            break
        time.sleep(0.005)
    return streams, arrivals


def warm_up(router, trace: list[TraceRequest], timeout_s: float = 60.0, workers=()) -> None:
    """One request of the shared system prompt, served to the end before the trace starts.

    A serving system's system prompt is in its caches in steady state, and the simulator starts
    so (it warms P's and every decoder's cache with the workload's shared prefix). Cold, the
    first conversation ships the prefix over the line and the decoder defers the next
    conversations' pulls until it lands (``executor/roles/md.py: _inflight_prefix``): 1.7 s of
    start-up queueing that the trace would charge to its first requests.

    Before it, one fresh prompt as long as the trace's longest (a few output tokens): an engine's
    first long prefill and KV export pay one-time costs — the allocators growing to the forward's
    buffers — that the simulator's steady state does not have. Measured (2026-12-03, run j): the
    trace's first 995-token prefill took 1005 ms of CPU and the next, 918 tokens, 352 ms; the first
    anomalous request's export took 786 ms against 40-60 ms for the same size later.

    Then it waits until ``workers`` (the cluster's role workers) hold no request and no message: a
    closed stream is not a quiet cluster. In pdd the shared prompt relays (fresh, short): RLD finishes its
    16 tokens in ~0.1 s while MD's pull of the prefix (8 MB, 0.34 s on the 200 Mbit/s line) is still on
    the line, and the trace's first conversation, 0.2 s later, found it in flight and deferred its own
    pull until it landed (``_inflight_prefix``): 94-108 ms later than the simulator's warm start, so RLD
    made 132-152 tokens where the simulator made 46-59 (issue 48: a third of the RLD token-share gap).
    """
    longest = max(len(r.prompt) for r in trace)
    rng = random.Random(-1)
    fresh = [256, *(rng.randrange(256) for _ in range(longest - 1))]
    for prompt, out in ((fresh, 4), (shared_prefix(trace), 16)):
        stream = router.submit(prompt, SamplingParams(max_new_tokens=out, stop_at_eos=False))
        if not stream.closed.wait(timeout_s) or stream.error:
            raise RuntimeError(f"warm-up request failed: {stream.error or f'not done in {timeout_s:.0f} s'}")
    wait_quiet(workers, timeout_s)


def wait_quiet(workers, timeout_s: float = 60.0, poll_s: float = 0.005) -> None:
    """Return once every worker holds no live request and has nothing in its inbox (``stats_live``,
    ``inbox``), twice in a row ``poll_s`` apart (a message in flight between two of them is in neither)."""
    workers = list(workers)
    deadline = time.monotonic() + timeout_s
    quiet_once = False
    while True:
        quiet = all(w.stats_live() == 0 and w.inbox.empty() for w in workers)
        if quiet and quiet_once:
            return
        quiet_once = quiet
        if time.monotonic() > deadline:
            busy = [f"{w.name} ({w.stats_live()} live)" for w in workers if w.stats_live() or not w.inbox.empty()]
            raise RuntimeError(f"warm-up: the cluster was not quiet within {timeout_s:.0f} s: {', '.join(busy)}")
        time.sleep(poll_s)


def serve(name: str, trace: list[TraceRequest], line: LinkShape, ec: EngineConfig, seed: int) -> dict:
    specs, policy = setups()[name]
    links = {frozenset(("dc-a", "dc-b")): line}
    # a latency bench, not a fault drill: a request queued behind others (a loaded machine) is slow, not stalled
    config = ServingConfig(routing=policy, handoff=HandoffPolicy("adaptive", 64), links=links, heartbeat_s=None,
                           request_timeout_s=600, stall_s=600, lease_s=600)
    split: list[dict] = []  # each final handoff batch's wire / wait at MD / extend-decode
    # instrumented before the cluster starts: the workers bind their handlers as they start
    with serve_handoff.instrument(split), \
            LocalCluster(specs, MODEL, ec, config, transport="tcp", link_seed=seed) as cluster:
        warm_up(cluster.router, trace, workers=[inst.worker for inst in cluster.instances.values()])
        split.clear()
        warm_bytes = _line_bytes(cluster.stats())
        engines = {name: inst.worker.engine for name, inst in cluster.instances.items()}
        for engine in engines.values():
            engine.forward_log.clear()
        t0, at0 = time.monotonic(), time.perf_counter()
        streams, arrivals = replay(cluster.router, trace)
        wall_s = time.monotonic() - t0
        stats = cluster.stats()
        served = {kind: [[r.size, r.context, r.cpu_s, r.wall_s, round(r.at - at0, 4), name]
                         for name, e in engines.items() for r in e.forward_log.records(kind)]
                  for kind in ("prefill", "decode")}
    errors = [s.error for s in streams if s is None or s.error]
    records = [s.record if s is not None else None for s in streams]
    ttft = [r.ttft_s for r in records if r is not None and r.ttft_s is not None]
    tpot = [r.tpot_s for r in records if r is not None and r.tpot_s is not None]
    # each TPOT's gaps (output − 1): the TPOT mean over tokens weighs a request by them (bench/serve_tpot.py)
    tpot_gaps = [r.output_tokens - 1 for r in records if r is not None and r.tpot_s is not None]
    by_kind: dict[str, list[float]] = {}
    for req, r in zip(trace, records):
        if r is not None and r.ttft_s is not None:
            by_kind.setdefault(req.kind, []).append(r.ttft_s)
    handoffs = [r.extra for r in records if r is not None and "handoff_latency_s" in r.extra]
    phases: dict[str, dict[str, list[float]]] = {}  # kind → phase → seconds (executor's request records)
    for req, r in zip(trace, records):
        if r is not None and r.ttft_s is not None:
            for key, v in {"ttft_s": r.ttft_s, **r.extra}.items():
                if key.endswith("_s") and isinstance(v, (int, float)):
                    phases.setdefault(req.kind, {}).setdefault(key, []).append(float(v))
    return {
        "setup": name, "requests": len(trace), "errors": errors, "wall_s": wall_s, "arrivals": arrivals,
        "ttft_s": ttft, "tpot_s": tpot, "tpot_gaps": tpot_gaps, "ttft_by_kind": by_kind, "phases": phases,
        "outputs": [s.tokens if s is not None else None for s in streams],
        "pipelines": {p: sum(1 for r in records if r is not None and r.pipeline == p)
                      for p in sorted({r.pipeline for r in records if r is not None})},
        "prefix_hit": [r.prefix_hit_tokens / r.input_tokens for r in records if r is not None],
        "drc_hit": [r.extra.get("md_cached_tokens", 0) / r.input_tokens for r in records
                    if r is not None and "md_cached_tokens" in r.extra],
        "wan_bytes": _line_bytes(stats) - warm_bytes,
        # [size, context, thread CPU s, wall s, began (s into the replay), instance] of every prefill and decode step
        "forwards_served": served,
        "handoffs": handoffs,
        "handoff_split": split,
        "handoff_summary": serve_handoff.summary(records, split),
        "rld_tokens": sum(r.extra.get("relay_tokens", 0) for r in records if r is not None
                          and r.pipeline in ("P-RLD-MD", "P-RLD")),
        "output_tokens": sum(r.output_tokens for r in records if r is not None),
    }


def _line_bytes(stats: dict) -> int:
    return stats["links"].get("dc-a<->dc-b", {}).get("dc-a->dc-b", {}).get("bytes", 0)


def calibrated_serve(name: str, trace: list[TraceRequest], cal_trace: list[TraceRequest], line: LinkShape,
                     ec: EngineConfig, seed: int, table, retries: int) -> tuple[dict | None, dict, list[float]]:
    """(calibration serve, measured serve, the host's drift between them per attempt): the calibration trace
    then the measured one; served as a pair again, up to ``retries`` times, while the host's own pace
    (``served_forwards.host_drift``: lone forwards' thread CPU ÷ the table's) moved more than
    ``HOST_DRIFT`` between the two, keeping the pair that moved least. ``table`` None: no calibration."""
    pairs: list[tuple[float, dict | None, dict]] = []
    for attempt in range(1 + (retries if table is not None else 0)):
        cal = serve(name, cal_trace, line, ec, seed + 1) if table is not None else None
        res = serve(name, trace, line, ec, seed)
        moved = served_forwards.host_drift(cal["forwards_served"], res["forwards_served"], table) if cal else 1.0
        pairs.append((moved, cal, res))
        if moved <= served_forwards.HOST_DRIFT:
            break
        print(f"[{name}: the host's own pace moved {moved:.2f}x between the calibration and the serve (lone "
              f"forwards' thread CPU ÷ the table's; beyond {served_forwards.HOST_DRIFT}x, where a steady host "
              f"stays within 1.26x): "
              + ("serving both again]" if attempt < retries else "kept the pair that moved least]"), file=sys.stderr)
    _moved, cal, res = min(pairs, key=lambda p: p[0])
    return cal, res, [round(p[0], 3) for p in pairs]
