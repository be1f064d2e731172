"""Serve one agentic trace three ways — same-DC PD, naive cross-DC PD, PDD — over an emulated WAN.

    python bench/bench_serve.py [--quick] [--gbit-per-s 0.2] [--rtt-ms 30] [--jitter-ms 5] [--json OUT]

What runs: the executor's real engines (a tiny seeded Llama whose KV per token is
large — 32 KiB — while its compute stays tiny), real sockets in each datacenter,
and a `LinkEmulator` shaping the line between them (token bucket shared by all
transfers, RTT/2 each way, jitter). Everything runs in this process on CPU.

The trace: conversations that share a long system prefix and come back turn after
turn with their context (high prefix hit), each opened by a low-hit first turn with
a long output, plus a few anomalous long-input, low-hit, short-output requests.
The first turns relay (P → RLD → MD) and are made to hand off in both modes (issue 48): half the
conversations open short (80-160 tokens of their own: the KV crosses the 200 Mbit/s line in
0.1-0.2 s, while RLD has made fewer than `catch_up_threshold_tokens` = 64 tokens even at a 6 ms step:
one-shot), half long (1300-1500: 1.7-2.0 s, over 64 tokens at up to a 25 ms step: catch-up), and
every answer is 320 tokens, more than RLD makes before MD has the KV even at 8 ms a step, so MD
finishes each one (the PDD report: 64K-token contexts, ~1K outputs, 100-token handoffs, RLD 6.2 % of
the output tokens; here RLD holds 10-60 % of a relayed answer: 1,000-token answers would take 15-30 s
of decoding each on this CPU). The anomalous requests are filtered to RLD and finish there. The
planner's classes split the short and the long conversations (`request_class`).
The same trace (same prompts, same arrival times) is served by:

- same-dc-pd: P and D in dc-a (the KV never crosses the WAN) — the lower bound;
- cross-dc-pd ("naive"): P in dc-a, D in dc-b, every request P → D over the line.
  D keeps a radix cache (ships only what it lacks), so naive here differs from PDD
  only in the relay and the filter;
- pdd: P and RLD in dc-a, MD in dc-b; the router sends high-hit requests P → MD,
  low-hit ones P → RLD → MD (token-ID handoff), anomalous ones P → RLD only.

Prints TTFT P50/P90/P99 of each (client side, at the router), the PDD / naive P90
ratio, the handoff's token-ID bytes vs the KV bytes they replace, handoff latency, and
measured vs predicted TTFT P50/P90/P99 and TPOT P50/P90 per setup with the error: the
simulator (`placer.sim` with `SimConfig.runtime`, the executor's runtime) and the planner
(`placer.optimize.evaluate_plan`, TTFT and TPOT), both from the CPU profile of the bench model
(`placer profile model --device cpu --grid serve --rounds 3`, measured first unless `--profile`)
and the runtime figures (`bench/measure_runtime.py`, unless `--runtime`), on the same
trace: same prompts, the arrival times each setup saw. The machine may be shared: the
profile is in CPU seconds and each setup's simulation takes the one-thread slowdown, the
speedup of 1-3 concurrent engine threads, each phase's pace (lone forwards at a few grid
points ÷ the profile's) and what a neighbour thread's prefills or decode steps, or a busy line at
the served rate, cost each kind of forward (``interference``), measured just before and after serving it
(`measure_runtime.probe_host`). `--quick` is a smaller run of the same
comparison (27 requests); the full run has 102 (its P90's bootstrap interval is printed).

Calibration: the probes' neighbours are bare forwards, while a serving process also runs the router,
the transport's loops and the I/O thread beside them; served forwards went 10-40 % slower than the
probes read minutes apart (docs/benchmarks.md, 2026-12-03). So before the measured trace, each setup
serves a calibration trace — the same shape of trace with another seed, so other
prompts and arrival times — and the simulation takes its paces and interference from those served
forwards (`served_forwards.calibration`: wall seconds ÷ the table's, grouped by what the other
instances ran meanwhile). It also reshapes the prefill table to the calibration's lone prefills
(`served_forwards.table_shape`): one pace weighs the forwards by their seconds, and the few long
prefills set it for the many short ones, which went 0.66-1.30x the table where the long ones went
0.94-1.13x (2026-12-03); `--no-shape` keeps one prefill pace. A prediction from a calibration says
nothing of the simulator when the host itself changed speed between the two serves: where the lone
forwards' thread CPU ÷ the table's moved more than 1.5x between them (a steady host: within 1.26x),
the setup serves both again (`--host-retries`, 2) and the report prints the drift it kept. The
"probes" column is the simulation without the calibration; `--no-calibration` skips it (about
100 s per setup). `--repeats N` serves the measured trace N times per setup: "measured" is then
their median, and the report prints the executor's own spread over them, the noise floor any
prediction of it is read against, and predicts each serve from the serve just before it (the first
from the calibration serve): as many predictions per setup as serves.

Handoffs (issue 48, `bench/serve_handoff.py`): the PDD serve's handoffs per mode, the relayed requests MD
finished, RLD's share of the output tokens, tokens handed over and MD's extend-decode time, beside the
simulator's for the same trace (its handoff plans recorded as it makes them), the latency of each final
batch split into wire / wait at MD / extend-decode (mean/max/std, per mode), and the report's 100-token
payload: token IDs vs the KV they replace. The planner (`placer.optimize.evaluate_plan`: TTFT P50/P90/P99 and
its one TPOT) is gated like the simulator (within 15 % on TTFT P50, P90 and TPOT P50), and
`bench/planner_check.py` walks from the planner to the simulator one input at a time (the simulator on the
ILP's own inputs — classes, Poisson, no executor overheads —, then on the trace as served, then with the
executor's runtime), so that where they part the report shows whether an ILP law or an input is off.
The planner's CPU chip moves a KV inside a datacenter at the executor's own copy rate
(`local_kv_gbit`: the runtime's export and import copies), not a NIC's.

The report has a fourth column, "as served": the same simulation at the host's speed as each serve
really went — its lone decode steps' thread CPU seconds (each engine's `forward_log`) ÷ the
calibration's for the same shapes, 10 s by 10 s (`served_forwards.pace_timeline`, the runtime's
`host_pace`), and its lone prefills' the same way, 20 s by 20 s (`host_pace_prefill`: the compute-bound
prefill and the memory-bound step move apart), each serve simulated at its own arrivals and timelines,
the figure the median over the serves. It uses the serves' own forwards, so it is no prediction; it
tells how much of the error is the host's moving between the calibration and the serve (printed per
setup: each serve's mean speed and its slowest and fastest window) and how much the simulator's own. A shared host moved
that much: in run y (2026-12-05) same-dc's serves went 1.08, 1.16 and 1.20x the calibration's pace
(windows 0.87-1.43x) and TPOT P50 came out -30 %, where the same simulation at the serves' speed
came within 11 %: turns that arrive together share the decoder's steps, so a slower host lengthens
what they share as well as each step, and TPOT moved about twice as much as the pace. Without a
calibration the column is the probes' simulation at the served forwards' mean pace. The last
table checks the simulator's cost model forward by forward (`bench/served_forwards.py`): the
served forwards grouped by what the other instances ran meanwhile, their wall ÷ table seconds
beside what the simulator charges that kind with those neighbours.

Each setup first serves a fresh prompt as long as the trace's longest and one request of the
shared system prompt to the end (`warm_up`): in steady state the engines are warm and the prompt
is cached, and the simulator starts so. The trace is spaced (a conversation every 2 s, 10 s of
thinking between turns) so that the decoders work well under half of the time: closer to
saturation, a queue's length moves by e / (1 - busy) for a cost error e, and at the 85-90 % the
first spacing (1.2 s, 2 s) gave, a 10 % error in a step's cost — the spread of a shared host's
memory bandwidth within minutes — moved TPOT by 30-50 %. The bench
model's decode step costs about the same per sequence at any batch (its attention reads 32 KiB
of KV per token and dominates), so a decoder has no batching to absorb load: 3.5 s of thinking
kept it 60-70 % busy when the host was fast and 75-87 % when it ran 10-30 % slower
(2026-12-03), where a 16 % pace error moved TPOT P50 by 40-60 %; 6 s kept the simulated decoders
56-73 % busy, where the 10-15 % the host's pace moved between a calibration serve and the measured
one a minute later doubled TPOT P50 (run j). The report prints each setup's simulated busy
fractions and that factor.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import planner_check, served_forwards, serve_handoff
from executor.cluster import LocalCluster
from executor.config import ServingConfig
from executor.engine import EngineConfig, ModelConfig, SamplingParams
from executor.handoff import HandoffPolicy
from executor.placement import InstanceSpec
from executor.routing import Pipeline, RoutingPolicy
from executor.transport.shaping import LinkShape
from placer.pdd import FilterRule

# ---- the model: big KV per token, tiny compute -------------------------------------------------

MODEL = ModelConfig(num_layers=2, hidden_size=64, num_q_heads=2, num_kv_heads=2, head_dim=1024,
                    intermediate_size=128)  # 2 × 2 × 2 × 1024 × 4 B = 32 KiB of KV per token
BLOCK = 16

# ---- the trace -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceConfig:
    conversations: int
    turns: int
    anomalous: int
    shared_tokens: int = 256  # system prompt + tool definitions, common to every conversation
    # a new conversation's own context: even conversations draw from the first range, odd from the second —
    # a short one whose KV crosses while RLD has made fewer tokens than catch_up_threshold_tokens (one-shot
    # handoff) and a long one over it (catch-up); the arithmetic in the module's docstring
    first_user_tokens: tuple[int, int] = (80, 160)
    long_first_user_tokens: tuple[int, int] = (1300, 1500)
    turn_tokens: tuple[int, int] = (24, 56)  # what each later turn appends (reply + tool output)
    new_output_tokens: int = 320  # first turns: long answers (RLD still decoding when MD has the KV)
    turn_output_tokens: int = 16
    anomalous_tokens: int = 1300
    anomalous_output_tokens: int = 4
    stagger_s: float = 2.0  # between conversation starts
    think_s: float = 10.0  # between turns of one conversation


QUICK = TraceConfig(conversations=5, turns=5, anomalous=2, turn_output_tokens=8, stagger_s=1.5,
                    think_s=5.0)  # 27 requests
FULL = TraceConfig(conversations=12, turns=8, anomalous=6)  # 102 requests: see p90_spread


@dataclass(frozen=True)
class TraceRequest:
    t_s: float  # turn 0 and anomalous: arrival time; later turns: think time after the previous answer
    prompt: tuple[int, ...]
    max_tokens: int
    kind: str  # new | turn | anomalous
    hit_estimate: float  # what the engines' prefix caches hold of it: whole blocks (see cached)
    conv: int = -1  # conversation (-1: a lone anomalous request)
    turn: int = 0


def make_trace(cfg: TraceConfig, seed: int) -> list[TraceRequest]:
    """Conversations (turn k+1 comes `think_s` after turn k's answer ended) and lone anomalous requests."""
    rng = random.Random(seed)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(256) for _ in range(n)]

    def cached(prefix: int, n: int) -> float:
        """The share of an n-token prompt a radix cache holding a prefix-token prefix reuses: whole
        blocks only (the engine's cache is block-granular), so a turn ships up to BLOCK - 1 more."""
        return (prefix - prefix % BLOCK) / n

    shared = [256, *tokens(cfg.shared_tokens)]
    out: list[TraceRequest] = []
    for c in range(cfg.conversations):
        start = 0.2 + c * cfg.stagger_s
        context = shared + tokens(rng.randint(*(cfg.long_first_user_tokens if c % 2 else cfg.first_user_tokens)))
        out.append(TraceRequest(start, tuple(context), cfg.new_output_tokens, "new", cached(len(shared), len(context)),
                                c, 0))
        for k in range(1, cfg.turns):
            before = len(context)
            context = context + tokens(rng.randint(*cfg.turn_tokens))
            out.append(TraceRequest(cfg.think_s, tuple(context), cfg.turn_output_tokens, "turn",
                                    cached(before, len(context)), c, k))
    span = cfg.conversations * cfg.stagger_s + cfg.turns * cfg.think_s
    for a in range(cfg.anomalous):
        prompt = shared + tokens(cfg.anomalous_tokens)
        t = span * (a + 0.5) / (cfg.anomalous + 0.5)
        out.append(TraceRequest(t, tuple(prompt), cfg.anomalous_output_tokens, "anomalous",
                                cached(len(shared), len(prompt))))
    return out


# ---- the three setups --------------------------------------------------------------------------------

FILTER = {"filter_min_input_tokens": 1024, "filter_max_hit_rate": 0.5, "filter_max_output_tokens": 32}


def setups() -> dict[str, tuple[list[InstanceSpec], RoutingPolicy]]:
    pd = RoutingPolicy(allowed=frozenset({Pipeline.P_D}))
    return {
        "same-dc-pd": ([InstanceSpec("p0", "P", "dc-a", "CPU"), InstanceSpec("d0", "D", "dc-a", "CPU")], pd),
        "cross-dc-pd": ([InstanceSpec("p0", "P", "dc-a", "CPU"), InstanceSpec("d0", "D", "dc-b", "CPU")], pd),
        "pdd": ([InstanceSpec("p0", "P", "dc-a", "CPU"), InstanceSpec("rld0", "RLD", "dc-a", "CPU"),
                 InstanceSpec("md0", "MD", "dc-b", "CPU")],
                RoutingPolicy(direct_min_hit_rate=0.8,
                              filter_rule=FilterRule(**{k.removeprefix("filter_"): v for k, v in FILTER.items()}))),
    }


def engine_config(trace: list[TraceRequest]) -> EngineConfig:
    """A KV pool that holds every conversation's last context and every output, with room to spare."""
    last: dict[int, TraceRequest] = {}
    for r in trace:
        if r.conv < 0 or r.turn >= last.get(r.conv, r).turn:
            last[r.conv if r.conv >= 0 else -1 - len(last)] = r
    tokens = sum(len(r.prompt) for r in last.values()) + sum(r.max_tokens for r in trace)
    tokens = int(tokens * 1.5)
    return EngineConfig(backend="torch", block_size=BLOCK, num_blocks=tokens // BLOCK + 256,
                        max_prefill_tokens=4096)


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


def shared_prefix(trace: list[TraceRequest]) -> tuple[int, ...]:
    """The tokens every conversation's prompt starts with (the system prompt and tool definitions)."""
    prompts = [r.prompt for r in trace if r.conv >= 0]
    n = min(len(p) for p in prompts)
    k = next((i for i in range(n) if len({p[i] for p in prompts}) > 1), n)
    return prompts[0][:k]


def warm_up(router, trace: list[TraceRequest], timeout_s: float = 60.0) -> None:
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
    """
    longest = max(len(r.prompt) for r in trace)
    rng = random.Random(-1)
    fresh = [256, *(rng.randrange(256) for _ in range(longest - 1))]
    for prompt, out in ((fresh, 4), (shared_prefix(trace), 16)):
        stream = router.submit(prompt, SamplingParams(max_new_tokens=out, stop_at_eos=False))
        if not stream.closed.wait(timeout_s) or stream.error:
            raise RuntimeError(f"warm-up request failed: {stream.error or f'not done in {timeout_s:.0f} s'}")


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
        warm_up(cluster.router, trace)
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
        "ttft_s": ttft, "tpot_s": tpot, "ttft_by_kind": by_kind, "phases": phases,
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


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


# ---- predictions -----------------------------------------------------------------------------------

PROFILE_NAME = "bench-tiny"  # the measured table's model name = the scenario's inline model


def measure_profile(path: Path, reps: int, rounds: int = 3) -> Path:
    """`placer profile model --device cpu --grid serve --rounds 3` with the bench model's shape, written to `path`."""
    from placer.profiles.records import ChipProfile
    from profiler.model import profile_model

    shape = {"num_layers": MODEL.num_layers, "hidden_size": MODEL.hidden_size, "num_q_heads": MODEL.num_q_heads,
             "num_kv_heads": MODEL.num_kv_heads, "head_dim": MODEL.head_dim,
             "intermediate_size": MODEL.intermediate_size, "vocab_size": MODEL.vocab_size}
    raw = profile_model("cpu", "llama-3.1-8b", 1, "serve", None, reps, shape, dtype="float32", name=PROFILE_NAME,
                        rounds=rounds)
    ChipProfile.model_validate(raw).save(path)
    return path


CLASSES = ("new", "new-long", "turn", "turn-long", "anomalous")


def request_class(r: TraceRequest) -> str:
    """The planner's class of a trace request: its kind, "-long" for the long conversations (odd ones)."""
    return r.kind + ("-long" if r.conv >= 0 and r.conv % 2 else "")


def local_kv_gbit(runtime: dict) -> float:
    """The rate of a KV's move between two instances in one datacenter as the executor makes it, in Gbit/s:
    in one process the transport hands the payload over without a socket (``TcpEndpoint._local_peer``), so
    the move is P's export copy then the decoder's import copy, one after the other (``measure_runtime``'s
    ``kv_export_bytes_per_s`` and ``kv_import_bytes_per_s``); NIC_GBIT without them."""
    export, imp = runtime.get("kv_export_bytes_per_s"), runtime.get("kv_import_bytes_per_s")
    if not export or not imp:
        return NIC_GBIT
    return 8 / (1 / export + 1 / imp) / 1e9


NIC_GBIT = 2.0  # the CPU chip's NIC where the runtime's copy rates are not known


def scenario_and_plans(trace: list[TraceRequest], arrivals: list[float], line: LinkShape, profile: Path,
                       nic_gbit: float = NIC_GBIT):
    """The bench setting as a placer scenario (its chip and model from the CPU profile, the
    profile's measured table as the performance model) and the three plans. ``nic_gbit``: the chip's NIC,
    which prices a KV's move inside a datacenter (P → D in same-dc-pd, P → RLD in pdd): the executor's
    own copy rate (:func:`local_kv_gbit`) — at 2 Gbit/s a 1,300-token prompt's 43 MB took the planner
    0.17 s where the executor copies it in ~12 ms."""
    from placer.plan import Plan
    from placer.specs import parse_scenario

    raw = json.loads(profile.read_text())
    table = raw["tables"][0]
    model = table["model_shape"]["scenario_model"]
    roof = raw["rooflines"]
    # the CPU as a chip: the profiler's (generous) rooflines as its peaks — used outside the
    # table's grid only, and to refuse a table faster than the hardware
    flops = max(roof["flop_per_s"].values())
    chip = {"name": table["chip"], "bf16_tflops": flops / 1e12, "mem_gb": 8.0,
            "mem_bw_tbps": roof["mem_bw_bytes_per_s"] / 1e12, "price_usd_per_h": 1.0, "nic_gbit": nic_gbit}
    seen = [a for a in arrivals if not math.isnan(a)]
    span = max(seen) - min(seen)
    classes = []
    for kind in CLASSES:  # the short and the long conversations apart: a class is one size, not a mix of two
        group = [r for r in trace if request_class(r) == kind]
        if group:
            classes.append({"name": kind, "share": len(group) / len(trace),
                            "input_tokens": round(statistics.mean(len(r.prompt) for r in group)),
                            "output_tokens": round(statistics.mean(r.max_tokens for r in group)),
                            "hit_rate": statistics.mean(r.hit_estimate for r in group)})
    shares = sum(c["share"] for c in classes)
    classes[-1]["share"] += 1.0 - shares
    cpu = chip["name"]
    scenario = parse_scenario({
        "name": "bench-serve", "model": model, "kv_dtype": "bf16", "weight_dtype": "bf16", "chips": [chip],
        "profiles": [str(profile)],
        "datacenters": [{"name": "dc-a", "inventory": {cpu: 4}}, {"name": "dc-b", "inventory": {cpu: 4}}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": line.gbit_per_s, "rtt_ms": line.rtt_ms,
                   "jitter_ms": line.jitter_ms}],
        "workload": {"arrival_rps": len(trace) / max(span, 1e-3), "classes": classes},
        "sla": {"ttft_p90_s": 60.0, "tpot_s": 1.0},  # loose: we compare latencies, not SLA
        "options": {"tp_degrees": [1], "utilization_cap": 0.95, "link_utilization_cap": 0.95,
                    "catch_up_threshold_tokens": 64, **FILTER},
    })
    pool = lambda role, dc: {"role": role, "datacenter": dc, "chip": cpu, "tp": 1, "count": 1}
    route = lambda cls, pipe, dst: {"request_class": cls, "pipeline": pipe, "src": "dc-a", "dst": dst,
                                    "rps": scenario.workload.arrival_rps * next(c["share"] for c in classes
                                                                                if c["name"] == cls)}
    names = [c["name"] for c in classes]
    pdd_pipe = {"new": ("P-RLD-MD", "dc-b"), "new-long": ("P-RLD-MD", "dc-b"), "turn": ("P-MD", "dc-b"),
                "turn-long": ("P-MD", "dc-b"), "anomalous": ("P-RLD", "dc-a")}
    plans = {
        # D of the PD baselines = an MD with its radix cache and no relay: the planner's P-MD route
        "same-dc-pd": Plan.model_validate({"scenario": "bench-serve", "pools": [pool("P", "dc-a"), pool("MD", "dc-a")],
                                           "routes": [route(n, "P-MD", "dc-a") for n in names]}),
        "cross-dc-pd": Plan.model_validate({"scenario": "bench-serve", "pools": [pool("P", "dc-a"),
                                                                                  pool("MD", "dc-b")],
                                            "routes": [route(n, "P-MD", "dc-b") for n in names]}),
        "pdd": Plan.model_validate({"scenario": "bench-serve",
                                    "pools": [pool("P", "dc-a"), pool("RLD", "dc-a"), pool("MD", "dc-b")],
                                    "routes": [route(n, *pdd_pipe[n]) for n in names],
                                    "handoff": {"mode": "adaptive", "catch_up_threshold_tokens": 64}}),
    }
    return scenario, plans


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


def _drift_text(drifts: list[float] | None) -> str:
    """The calibration line's note of the host's drift between the calibration and the measured serve."""
    if not drifts:
        return ""
    kept = min(drifts)
    again = f"; served again {len(drifts) - 1}x after {', '.join(f'{d:.2f}x' for d in drifts[:-1])}" \
        if len(drifts) > 1 else ""
    flag = f" BEYOND {served_forwards.HOST_DRIFT}x: the host, not the simulator" \
        if kept > served_forwards.HOST_DRIFT else ""
    return f" [host's pace vs the serve {kept:.2f}x{again}{flag}]"


def trace_file(path: Path, trace: list[TraceRequest], arrivals: list[float]) -> int:
    """The trace as served (same prompts, the arrival times it had) as placer's JSONL trace."""
    rows = sorted((a, r) for a, r in zip(arrivals, trace) if not math.isnan(a))
    path.write_text("".join(json.dumps({"timestamp": a * 1000, "input_length": len(r.prompt),
                                        "output_length": r.max_tokens, "hit_rate": r.hit_estimate}) + "\n"
                            for a, r in rows))
    return len(rows)


def predict(trace: list[TraceRequest], results: dict[str, dict], line: LinkShape, profile: Path, runtime: dict,
            seed: int, shape: bool = True) -> dict:
    """Each setup's TTFT P50/P90/P99 and TPOT P50/P90 by the simulator on the executor's runtime
    (and TTFT by the planner), at the arrivals it saw, from the CPU profile, the probes around the
    serving and the calibration serve before it; and, to tell the table's error from the
    simulator's, once more at the pace the served forwards really went (``served_paces``).
    ``shape``: the calibration also reshapes the prefill table (``served_forwards.table_shape``)."""
    from placer.optimize import SolveConfig, evaluate_plan
    from placer.sim.runtime import ExecutorRuntime, interference_rows

    base = ExecutorRuntime.from_dict(runtime)
    table = _table(profile)
    nic = local_kv_gbit(runtime)
    out: dict = {"planner": {}, "simulator": {}, "probes": {}, "as_served": {}, "notes": [], "paces": {},
                 "served_paces": {}, "forwards": {}, "calibration": {}, "host_pace": {}, "ladder": {}}
    with tempfile.TemporaryDirectory() as tmp:  # the reshaped profiles
        for name, res in results.items():
            paces = probe_paces(res.get("probe_forwards", {}), table)
            out["paces"][name] = paces
            rt = replace(base, slowdown=res.get("slowdown", base.slowdown),
                         speedup=tuple(res.get("speedup", base.speedup)), **paces,
                         interference=interference_rows(res["interference"]) if "interference" in res
                         else base.interference)
            if rt.line_rows():  # measured beside the served line (probe_host at its rate)
                rt = replace(rt, line_bytes_per_s=line.bytes_per_s)
            scenario, plans = scenario_and_plans(trace, res["arrivals"], line, profile, nic)
            plan = plans[name]
            try:
                m = evaluate_plan(scenario, plan, SolveConfig(time_limit_s=20)).metrics
                # the planner's one TPOT (its decode step at the design batch) beside both TPOT percentiles
                out["planner"][name] = {"ttft": (m.ttft_p50_s, m.ttft_p90_s, m.ttft_p99_s),
                                        "tpot": (m.tpot_s, m.tpot_s), "rld_token_share": m.rld_token_share}
            except Exception as exc:  # the planner's figure is advisory here: report it
                out["notes"].append(f"planner, {name}: {type(exc).__name__}: {exc}")
            probe_rt, sim_table, sim_scenario, sim_plan, cal = rt, table, scenario, plan, {}
            if "calibration" in res:
                cal_forwards = res["calibration"]["forwards_served"]
                factors = served_forwards.table_shape(cal_forwards, table, "prefill") if shape else []
                if factors:  # the prefill table's shape as the calibration's lone prefills went
                    path = Path(tmp) / f"{name}-profile.json"
                    path.write_text(json.dumps(served_forwards.reshaped_profile(json.loads(profile.read_text()),
                                                                               "prefill", factors)))
                    sim_table = _table(path)
                    sim_scenario, sim_plans = scenario_and_plans(trace, res["arrivals"], line, path, nic)
                    sim_plan = sim_plans[name]
                cal = {**served_forwards.calibration(cal_forwards, sim_table), "prefill_shape": factors}
            if "decode_pace" in cal or "prefill_pace" in cal:
                out["calibration"][name] = cal
                rt = served_forwards.calibrated(rt, cal)
                out["probes"][name] = _simulate(scenario, plan, trace, res["arrivals"], probe_rt, seed)
            out["simulator"][name] = _simulate(sim_scenario, sim_plan, trace, res["arrivals"], rt, seed)
            out["ladder"][name] = planner_check.ladder_for(trace, res["arrivals"], scenario, plan,
                                                           out["planner"].get(name), out["simulator"][name], seed)
            out["forwards"][name] = served_forwards.compare(res.get("forwards_served", {}), sim_table, rt)
            served = served_paces(res.get("forwards_served", {}), table, rt.slowdown)
            if served:
                out["served_paces"][name] = served
            at_host = host_paced(trace, res, cal_forwards, sim_table, sim_scenario, sim_plan, rt, seed) \
                if name in out["calibration"] else {}
            if at_host:  # the calibrated simulation at the host's speed as it went in each serve
                out["host_pace"][name] = at_host.pop("host_pace")
                out["as_served"][name] = at_host
            elif served:  # no calibration: at the served forwards' pace (their CPU seconds hold what they cost
                # each other: no interference on top)
                out["as_served"][name] = _simulate(scenario, plan, trace, res["arrivals"],
                                                   replace(probe_rt, **served, interference=()), seed)
    return out


PREFILL_PACE_WINDOW_S, PREFILL_PACE_LEAST = 20.0, 8  # the bench's serves prefill ~1 prompt a second


def _only(reference: dict[str, float], kind: str) -> dict[str, float]:
    return {kind: reference[kind]} if kind in reference else {}


def host_paced(trace: list[TraceRequest], res: dict, cal_forwards: dict, table, scenario, plan, rt, seed: int
               ) -> dict:
    """The calibrated simulation (``rt``) of each serve of a setup at the host's speed as that serve's lone
    decode steps went, 10 s by 10 s, against the calibration's (``served_forwards.pace_timeline``), and its
    prefills at their own (20 s by 20 s: the compute-bound prefill moves apart from the memory-bound step), at
    the serve's own arrivals; each figure the median over the serves, as "measured" is. ``host_pace``: per
    serve, its timelines, the time-weighted mean of each and the decode steps' lowest and highest window.
    Empty where a serve had too few lone decode steps to read it (a run saved without their times)."""
    reference = served_forwards.cpu_paces(cal_forwards, table)
    sims, timelines = [], []
    for serve in [res, *res.get("repeats", [])]:
        arrivals = serve.get("arrivals", res["arrivals"])
        came = [a for a in arrivals if not math.isnan(a)]
        forwards = serve.get("forwards_served", {})
        timeline = served_forwards.pace_timeline(forwards, table, _only(reference, "decode"), start=min(came))
        if not timeline:
            return {}
        # the prefills' own (compute-bound, they move apart from the decode steps): fewer, so longer windows
        prefill = served_forwards.pace_timeline(forwards, table, _only(reference, "prefill"), start=min(came),
                                                window_s=PREFILL_PACE_WINDOW_S, least=PREFILL_PACE_LEAST)
        span = max(came) - min(came)
        timelines.append({"timeline": timeline, "mean": round(served_forwards.mean_pace(timeline, span), 3),
                          "low": min(f for _, f in timeline), "high": max(f for _, f in timeline),
                          "prefill_timeline": prefill,
                          "prefill_mean": round(served_forwards.mean_pace(prefill, span), 3) if prefill else math.nan})
        sims.append(_simulate(scenario, plan, trace, arrivals,
                              replace(rt, host_pace=tuple(timeline), host_pace_prefill=tuple(prefill)), seed))
    return {kind: tuple(statistics.median(s[kind][i] for s in sims) for i in range(len(sims[0][kind])))
            for kind in ("ttft", "tpot")} | {"host_pace": timelines}


def chained(trace: list[TraceRequest], results: dict[str, dict], line: LinkShape, profile: Path, runtime: dict,
            seed: int, shape: bool = True) -> dict:
    """With ``--repeats``: each measured serve predicted from the serve just before it (the first from the
    calibration serve, each repeat from the serve before), so a setup gives as many predictions as serves.
    Per setup, one row per serve: {metric: (measured, simulated)} on the gated metrics."""
    out: dict = {}
    for name, res in results.items():
        if "calibration" not in res or not res.get("repeats"):
            continue
        serves = [res["calibration"], res, *res["repeats"]]
        for before, serve in zip(serves, serves[1:]):
            cur = {**res, **{k: serve[k] for k in ("ttft_s", "tpot_s", "forwards_served")},
                   "arrivals": serve.get("arrivals", res["arrivals"]),  # runs saved before repeats kept theirs
                   "calibration": {"forwards_served": before["forwards_served"]}}
            sim = predict(trace, {name: cur}, line, profile, runtime, seed, shape)["simulator"][name]
            out.setdefault(name, []).append({label: (pct(serve[f"{kind}_s"], q), sim[kind][i])
                                             for label, kind, i, q in METRICS if label in GATED})
    return out


def print_chained(chain: dict) -> dict:
    """The chained predictions' errors, per setup and over all; returns the summary."""
    if not chain:
        return {}
    print(f"\neach serve predicted from the serve just before it (calibration → serve 1 → serve 2 …; error on "
          f"{', '.join(GATED)}):")
    errors = []
    for name, rows in chain.items():
        cells = []
        for row in rows:
            errs = {m: sim / meas - 1 for m, (meas, sim) in row.items() if meas > 0}
            errors += [abs(e) for e in errs.values()]
            cells.append(" ".join(f"{100 * e:+.0f}%" for e in errs.values()))
        print(f"  {name:<12} " + " | ".join(cells))
    within = sum(e <= 0.15 for e in errors)
    summary = {"figures": len(errors), "within_15": within, "median_abs_error": statistics.median(errors),
               "worst_abs_error": max(errors)}
    print(f"  {within} of {len(errors)} within 15 %; median |error| {100 * summary['median_abs_error']:.0f} %, "
          f"worst {100 * summary['worst_abs_error']:.0f} %")
    return summary


def _simulate(scenario, plan, trace: list[TraceRequest], arrivals: list[float], rt, seed: int) -> dict:
    from placer.sim import SimConfig, simulate

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        n = trace_file(path, trace, arrivals)
        with serve_handoff.sim_handoffs([]) as plans:
            sim = simulate(scenario, plan, SimConfig(requests=n, seed=seed, workload="trace", trace=str(path),
                                                     warmup_fraction=0.0, runtime=rt))
    return {"ttft": (sim["ttft_p50_s"], sim["ttft_p90_s"], sim["ttft_p99_s"]),
            "tpot": (sim["tpot_p50_s"], sim["tpot_p90_s"]),
            "handoff": serve_handoff.sim_summary(sim, plans),
            "busy": {p["role"]: p.get("busy_fraction", p.get("utilization")) for p in sim["pools"]}}


def _table(profile: Path):
    from placer.profiles.records import ChipProfile

    return ChipProfile.load(profile).tables[0].table()


def _against_table(forwards: dict[str, list[list[float]]], table) -> dict[str, list[tuple[float, float]]]:
    """Per phase, (seconds, the table's seconds) of each [size, context, seconds] row inside the grid."""
    out = {}
    for phase, rows in forwards.items():
        grid = table.prefill if phase == "prefill" else table.decode
        pairs = [(s, grid.seconds_at(size, ctx)) for size, ctx, s, *_ in rows]
        out[phase] = [(s, tab) for s, tab in pairs if tab]
    return out


def probe_paces(forwards: dict[str, list[list[float]]], table) -> dict[str, float]:
    """``prefill_pace`` / ``decode_pace``: the probe's lone forwards at serve time (wall seconds,
    ``measure_runtime.probe_forwards``) ÷ the profile's table at the same points, median per phase.
    Empty when the run was served without them (an older ``--served`` file): slowdown stands in."""
    return {f"{phase}_pace": round(statistics.median(s / tab for s, tab in pairs), 3)
            for phase, pairs in _against_table(forwards, table).items() if pairs}


def served_paces(forwards: dict[str, list[list[float]]], table, slowdown: float) -> dict[str, float]:
    """The pace the served forwards went (the engines' ``forward_log``): their thread CPU seconds
    ÷ the table's for the same shapes, summed over the forwards inside the table's grid, × the
    slowdown probed around the serving (wall ÷ CPU of one thread). It includes what forwards running
    at the same time cost each other in CPU (shared caches, memory bandwidth), so the "as served"
    simulation leaves out ``interference``; ``speedup``, measured with prefills, still charges a
    little of it twice while two forwards overlap."""
    return {f"{phase}_pace": round(slowdown * sum(s for s, _ in pairs) / sum(t for _, t in pairs), 3)
            for phase, pairs in _against_table(forwards, table).items() if pairs}


def p90_spread(values: list[float], rng: random.Random, draws: int = 400) -> float:
    """Relative half-width of the 90 % bootstrap interval of the P90: how stable the run's P90 is."""
    if len(values) < 10:
        return math.nan
    p90 = pct(values, 90)
    boot = sorted(pct(rng.choices(values, k=len(values)), 90) for _ in range(draws))
    return (boot[int(0.95 * draws) - 1] - boot[int(0.05 * draws)]) / 2 / p90


# ---- report ------------------------------------------------------------------------------------------


METRICS = (("TTFT P50", "ttft", 0, 50), ("TTFT P90", "ttft", 1, 90), ("TTFT P99", "ttft", 2, 99),
           ("TPOT P50", "tpot", 0, 50), ("TPOT P90", "tpot", 1, 90))
GATED = ("TTFT P50", "TTFT P90", "TPOT P50")  # issue 19: within 15 % on the full run


def compare(results: dict[str, dict], pred: dict) -> dict:
    """Print measured vs simulated (and the planner's TTFT) per setup with the error; return them."""
    rows: dict = {}
    spread_rng = random.Random(0)
    print("\nmeasured vs predicted (s; error = predicted / measured - 1; simulated: from the profile, the probes "
          "around the serving and the calibration serve before it; probes only: without the calibration; "
          "as served: the same simulation at the host's speed as each serve's own forwards went, or without a "
          "calibration the probes' at their pace):")
    print(f"  {'setup':<12} {'metric':<9} {'measured':>9} {'simulated':>10} {'error':>7}   {'probes':>8} {'error':>7}"
          f"   {'planner':>8} {'error':>7}   {'as served':>9} {'error':>7}")

    def cell(got: float, meas: float, width: int) -> tuple[float, str]:
        err = got / meas - 1 if meas > 0 else math.nan
        return err, (f"{got:>{width}.3f} {100 * err:>+6.0f}%" if not math.isnan(got) else f"{'-':>{width}} {'':>7}")

    spreads: list[float] = []
    for name, res in results.items():
        sim = pred.get("simulator", {}).get(name)
        probes = pred.get("probes", {}).get(name)
        plan = pred.get("planner", {}).get(name)
        served = pred.get("as_served", {}).get(name)
        rows[name] = {}
        own: list[str] = []
        for label, kind, i, q in METRICS:
            serves = serve_figures(res, kind, q)
            meas = statistics.median(serves)
            got = sim[kind][i] if sim else math.nan
            err = got / meas - 1 if meas > 0 else math.nan
            b_got = probes[kind][i] if probes else math.nan
            b_err, b_txt = cell(b_got, meas, 8)
            p_got = plan[kind][i] if plan and kind in plan else math.nan
            p_err, p_txt = cell(p_got, meas, 8)
            s_got = served[kind][i] if served else math.nan
            s_err, s_txt = cell(s_got, meas, 9)
            rows[name][label] = {"measured": meas, "simulated": got, "error": err, "probes": b_got,
                                 "probes_error": b_err, "planner": p_got, "planner_error": p_err,
                                 "as_served": s_got, "as_served_error": s_err, "serves": serves}
            if len(serves) > 1 and label in GATED:
                spread = (max(serves) - min(serves)) / meas if meas > 0 else math.nan
                spreads.append(spread)
                inside = min(serves) <= got <= max(serves)
                own.append(f"{label} {min(serves):.3f}-{max(serves):.3f} (±{50 * spread:.0f} %, simulated "
                           f"{'inside' if inside else 'outside'})")
            flag = " *" if label in GATED and not abs(err) <= 0.15 else ""
            print(f"  {name:<12} {label:<9} {meas:>9.3f} {got:>10.3f} {100 * err:>+6.0f}%{flag:<2} {b_txt}   "
                  f"{p_txt}   {s_txt}")
        if sim and sim.get("busy"):
            busy = sim["busy"]
            most = max(busy.values())
            print(f"  {name:<12} (simulated busy fraction {', '.join(f'{r} {b:.2f}' for r, b in busy.items())}: near "
                  f"{most:.2f} a cost error e moves the queueing by about e / (1 - {most:.2f}) = "
                  f"{1 / max(1 - most, 0.01):.1f} e)")
        moves = pred.get("host_pace", {}).get(name)
        if moves:
            print(f"  {name:<12} (the host's speed in each serve ÷ the calibration's, its lone forwards' thread CPU "
                  "÷ the table's, mean of its decode steps' 10-s windows (lowest-highest) / of its prefills': "
                  + ", ".join(f"{m['mean']:.2f} ({m['low']:.2f}-{m['high']:.2f}) / "
                              f"{m.get('prefill_mean', math.nan):.2f}" for m in moves)
                  + "; the as-served column charges them)")
        if own:
            print(f"  {name:<12} (the executor itself, {len(serves)} serves of this trace, measured = their median: "
                  + "; ".join(own) + ")")
        spread = p90_spread(res["ttft_s"], spread_rng)
        rows[name]["ttft_p90_spread"] = spread
        print(f"  {name:<12} (TTFT P90 of {len(res['ttft_s'])} requests: bootstrap 90 % interval "
              f"±{100 * spread:.0f} %)")
    order = lambda source: sorted(rows, key=lambda n: rows[n]["TTFT P90"][source])
    same, tied = same_ordering(rows)
    worst = max((abs(r[m]["error"]) for r in rows.values() for m in GATED), default=math.nan)
    ties = "; tied, their serves' P90s overlapping: " + ", ".join(f"{a} and {b}" for a, b in tied) if tied else ""
    print(f"  ordering of the setups by TTFT P90: measured {order('measured')}, simulated "
          f"{order('simulated')} ({'same' if same else 'DIFFERENT'} on the pairs the executor's serves order{ties}); "
          f"worst error on {', '.join(GATED)}: {100 * worst:.0f} % (* = outside 15 %)")
    planned = [abs(r[m]["planner_error"]) for r in rows.values() for m in GATED
               if not math.isnan(r[m]["planner_error"])]
    if planned:
        print(f"  planner (ILP, placer.optimize.evaluate_plan): {sum(e <= 0.15 for e in planned)} of {len(planned)} "
              f"within 15 % on {', '.join(GATED)}, worst error {100 * max(planned):.0f} %")
    served = [abs(r[m]["as_served_error"]) for r in rows.values() for m in GATED]
    worst_served = max(served) if served and not any(math.isnan(x) for x in served) else math.nan
    if not math.isnan(worst_served):
        print(f"  as served (the simulator given the host's speed as it went in the serves): worst error "
              f"{100 * worst_served:.0f} %")
    if spreads:
        print(f"  the executor's own spread (max - min over its serves ÷ their median) on {', '.join(GATED)}: "
              f"median {100 * statistics.median(spreads):.0f} %, worst {100 * max(spreads):.0f} %")
    for note in pred.get("notes", []):
        print(f"  note: {note}")
    print_forwards(pred.get("forwards", {}))
    planner_check.print_ladder(pred.get("ladder", {}), {n: {m: r[m]["measured"] for m in r if m in GATED}
                                                        for n, r in rows.items()})
    return {"rows": rows, "same_order": same, "tied": tied, "worst_gated_error": worst,
            "worst_as_served_error": worst_served,
            "worst_planner_error": max(planned) if planned else math.nan,
            "worst_executor_spread": max(spreads) if spreads else math.nan}


def same_ordering(rows: dict) -> tuple[bool, list[tuple[str, str]]]:
    """Whether the simulation orders the setups by TTFT P90 as the executor does, on every pair of setups the
    executor's serves order (one setup's P90s all below the other's); the pairs whose serves' P90s overlap
    are tied — which of them comes first changes from serve to serve — and are returned apart."""
    same, tied = True, []
    for a, b in itertools.combinations(sorted(rows, key=lambda n: rows[n]["TTFT P90"]["measured"]), 2):
        fa, fb = rows[a]["TTFT P90"], rows[b]["TTFT P90"]
        if max(fa["serves"]) >= min(fb["serves"]):
            tied.append((a, b))
        elif not fa["simulated"] < fb["simulated"]:
            same = False
    return same, tied


def serve_figures(res: dict, kind: str, q: float) -> list[float]:
    """A metric's percentile in each serve of the measured trace: the first, then each ``--repeats`` serve."""
    return [pct(res[f"{kind}_s"], q)] + [pct(r[f"{kind}_s"], q) for r in res.get("repeats", [])]


def print_forwards(forwards: dict[str, list[dict]]) -> None:
    """The simulator's cost of a forward, checked forward by forward (bench/served_forwards.py)."""
    if not any(forwards.values()):
        return
    print("\nserved forwards by what the other instances ran meanwhile (wall and thread CPU seconds ÷ the table's; "
          "simulated: what the simulator's Host charges that kind beside those, from the calibration serve where "
          "there was one, else from the probes with a busy line's cost left out):")
    for name, rows in forwards.items():
        for r in rows:
            print(f"  {name:<12} {r['kind']:<8} {served_forwards.describe(r['beside']):<34} {r['forwards']:>5} "
                  f"served {r['served_wall']:5.2f} (CPU {r['served_cpu']:4.2f})  simulated {r['simulated']:5.2f} "
                  f"{100 * r['error']:>+5.0f}%")


PHASES = ("orders_sent_after_s", "p_queue_s", "prefill_s", "md_p_pull_wait_s", "md_p_export_s", "md_kv_transfer_s",
          "md_kv_inbox_s", "md_import_s", "rld_p_pull_wait_s", "rld_p_export_s", "rld_kv_inbox_s", "rld_import_s",
          "t0_transit_s", "ttft_s")


def print_phases(results: dict[str, dict]) -> None:
    """Where the first token's time went, per setup and request kind: medians of the executor's phase
    times (the request records' `extra`; md_*/rld_*: as the first decoder saw them), in ms."""
    print("\nwhere TTFT went (medians, ms; executor's phase times):")
    for name, res in results.items():
        for kind, ph in sorted(res.get("phases", {}).items()):
            parts = [f"{k.removesuffix('_s')} {1000 * statistics.median(ph[k]):.1f}" for k in PHASES if ph.get(k)]
            print(f"  {name:<12} {kind:<9} " + ", ".join(parts))


def report(results: dict[str, dict], pred: dict, trace: list[TraceRequest], line: LinkShape, cal: dict) -> dict:
    kinds = {k: sum(r.kind == k for r in trace) for k in ("new", "turn", "anomalous")}
    print(f"trace: {len(trace)} requests ({kinds['turn']} later turns, high hit; {kinds['new']} new conversations "
          f"and {kinds['anomalous']} anomalous, low hit); KV {MODEL.kv_bytes_per_token // 1024} KiB/token")
    print(f"line dc-a<->dc-b: {line.gbit_per_s * 1000:g} Mbit/s, RTT {line.rtt_ms:g} ms, jitter {line.jitter_ms:g} ms;"
          f" a 1000-token uncached KV takes {line.transfer_estimate_s(1000 * MODEL.kv_bytes_per_token):.2f} s")
    if cal:
        print(f"runtime (measured, {cal.get('source', '')}): cores {cal['cores']:g}, per-request overhead "
              f"{1000 * cal['request_overhead_s']:.1f} ms CPU ({1000 * cal.get('ttft_overhead_s', 0.0):.1f} ms wall on "
              f"the first token's path), KV export {1000 * cal.get('kv_export_fixed_s', 0.0):.2f} ms + "
              f"{cal['kv_export_bytes_per_s'] / 1e6:.0f} MB/s, "
              f"import {1000 * cal.get('kv_import_fixed_s', 0.0):.2f} ms + "
              f"{cal['kv_import_bytes_per_s'] / 1e6:.0f} MB/s, per streamed token "
              f"{1e6 * cal['token_stream_s']:.0f} us CPU, WAN bytes on the I/O thread "
              f"{1e9 * cal.get('wan_cpu_s_per_byte', 0.0):.1f} ns CPU/byte, a WAN message's socket path "
              f"{1000 * cal.get('wan_latency_s', 0.0):.1f} ms + {1e9 * cal.get('wan_latency_s_per_byte', 0.0):.2f} "
              f"ns/byte (more beside 1, 2 … busy engine threads: "
              f"{', '.join(f'{1000 * x:.1f}' for x in cal.get('wan_latency_beside_s', ())) or '-'} ms), "
              f"a KV joining a busy connection behind {cal.get('wan_hol_bytes', 0.0) / 1e6:.2f} MB; "
              "at serve time, one thread's slowdown "
              "by other work "
              "and the speedup of 1-3 engine threads: "
              + ", ".join(f"{n} {r.get('slowdown', math.nan):.2f} {r.get('speedup', '-')}" for n, r in results.items()))
    if pred.get("served_paces"):
        print("pace of the served forwards (their thread CPU seconds ÷ the profile's for the same shapes, × the "
              "slowdown): " + ", ".join(f"{n} prefill {p.get('prefill_pace', math.nan):.2f} decode "
                                        f"{p.get('decode_pace', math.nan):.2f}"
                                        for n, p in pred["served_paces"].items()))
    walls = {n: {phase: sum(r[3] for r in rows) / sum(r[2] for r in rows)
                 for phase, rows in res.get("forwards_served", {}).items() if rows and len(rows[0]) > 3
                 and sum(r[2] for r in rows) > 0}
             for n, res in results.items()}
    if any(walls.values()):
        print("served forwards' wall ÷ thread CPU seconds (waits for a core or the GIL inside a forward): "
              + ", ".join(f"{n} " + " ".join(f"{phase} {v:.2f}" for phase, v in w.items()) for n, w in walls.items()))
    if pred.get("calibration"):
        print("calibration (the same shape of trace, another seed, served by each setup just before the measured one: "
              "the pace — served wall seconds ÷ the table's with nothing of ours beside — / the factor beside a "
              "prefill / beside a decode step): "
              + ", ".join(f"{n} ({results[n]['calibration']['requests']} requests) "
                          + " ".join(f"{k} {c.get(f'{k}_pace', math.nan):.2f}/"
                                     + "/".join(f"{c.get('interference', {}).get(k, {}).get(o, math.nan):.2f}"
                                                for o in ("prefill", "decode"))
                                     for k in ("prefill", "decode"))
                          + (" (prefill table reshaped to its prefills: its points × {:.2f}-{:.2f})".format(
                              min(map(min, c["prefill_shape"])), max(map(max, c["prefill_shape"])))
                             if c.get("prefill_shape") else "")
                          + _drift_text(results[n]["calibration"].get("host_drift"))
                          for n, c in pred["calibration"].items()))
    if pred.get("paces"):
        print("pace at serve time (a lone forward's wall seconds ÷ the profile's, median of the probe's grid points; "
              "the profile was measured minutes before): "
              + ", ".join(f"{n} prefill {p.get('prefill_pace', math.nan):.2f} "
                          f"decode {p.get('decode_pace', math.nan):.2f}" for n, p in pred["paces"].items()))
    if any("interference" in r for r in results.values()):
        beside = ("prefill", "decode", "line")
        print("interference (a lone forward — decode@B: a step of B sequences — beside one neighbour thread's "
              "prefills / decode steps / a busy line ÷ alone): " + ", ".join(
                  f"{n} " + " ".join(kind + " " + "/".join(f"{row.get(b, math.nan):.2f}" for b in beside)
                                     for kind, row in r["interference"].items())
                  for n, r in results.items() if "interference" in r))
    print()
    print(f"{'setup':<13} {'TTFT P50':>9} {'P90':>8} {'P99':>8}   {'WAN MB':>7}  pipelines / by kind (P50 s)")
    summary: dict = {}
    for name, r in results.items():
        t = r["ttft_s"]
        p = (pct(t, 50), pct(t, 90), pct(t, 99))
        summary[name] = p
        kinds_txt = ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in r["ttft_by_kind"].items())
        print(f"{name:<13} {p[0]:>8.3f}s {p[1]:>7.3f}s {p[2]:>7.3f}s   {r['wan_bytes'] / 1e6:>7.1f}  "
              f"{r['pipelines']}; {kinds_txt}" + (f"  ERRORS {len(r['errors'])}" if r["errors"] else "")
              + (f"  CALIBRATION ERRORS {len(r['calibration']['errors'])}"
                 if r.get("calibration", {}).get("errors") else "")
              + "".join(f"  REPEAT {i + 2} ERRORS {len(x['errors'])}" for i, x in enumerate(r.get("repeats", []))
                        if x["errors"]))
    ratio = summary["pdd"][1] / summary["cross-dc-pd"][1]
    print(f"\nPDD / naive cross-DC P90 TTFT: {ratio:.2f} (target <= 0.5; TTFT {100 * (ratio - 1):+.1f} %)")
    same = [results[n]["outputs"] == results["same-dc-pd"]["outputs"] for n in results]
    print(f"outputs identical across setups (greedy): {all(same)}")
    out: dict = {"ttft": summary, "p90_ratio": ratio, "outputs_identical": all(same)}
    out["handoff"] = serve_handoff.report(results["pdd"], pred)
    print_phases(results)
    out["comparison"] = compare(results, pred)
    chain = pred.get("chained", {})
    out["chained"] = {**print_chained(chain), "setups": chain}
    out["predicted"] = {k: pred.get(k) for k in ("planner", "simulator", "ladder")}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller trace (a few minutes)")
    ap.add_argument("--gbit-per-s", type=float, default=0.2, help="line rate (default 200 Mbit/s)")
    ap.add_argument("--rtt-ms", type=float, default=30.0)
    ap.add_argument("--jitter-ms", type=float, default=5.0)
    ap.add_argument("--loss", type=float, default=0.0, help="packet loss probability on the line")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=Path, help="CPU profile of the bench model (default: measure it now, "
                    "placer profile model --device cpu --grid serve)")
    ap.add_argument("--runtime", type=Path, help="runtime figures (default: measure them now, "
                    "bench/measure_runtime.py)")
    ap.add_argument("--reps", type=int, default=2, help="timed runs per profile grid point in each round")
    ap.add_argument("--profile-rounds", type=int, default=3,
                    help="passes over the profile's grid (the median of a point's runs over all of them is kept)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each runtime measurement")
    ap.add_argument("--no-predict", action="store_true", help="skip the planner and simulator predictions")
    ap.add_argument("--no-calibration", action="store_true",
                    help="do not serve a calibration trace before each setup: the simulation takes the probes' paces")
    ap.add_argument("--no-shape", action="store_true",
                    help="the calibration carries one prefill pace: it does not reshape the prefill table to its "
                         "served prefills")
    ap.add_argument("--repeats", type=int, default=1,
                    help="serve the measured trace this many times per setup (about 100 s each): 'measured' is "
                         "their median and the report prints the executor's own spread")
    ap.add_argument("--host-retries", type=int, default=2,
                    help="serve a setup's calibration and measured traces again, up to this many times, while the "
                         "host's own pace moved more than 1.5x between them (a burst of other work on the machine)")
    ap.add_argument("--served", type=Path, help="predict for the runs saved in this file (--json X saves them "
                    "as X.served.json) instead of serving again; needs --profile and --runtime")
    ap.add_argument("--turns", type=int, help="turns per conversation (default: the trace's, 8; --quick 5): "
                    "fewer to fit a time box (each turn adds about 10.5 s to each of the six serves)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.turns is not None and args.turns < 1:
        ap.error(f"--turns must be at least 1, got {args.turns}")
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.host_retries < 0:
        ap.error(f"--host-retries must be 0 or more, got {args.host_retries}")
    return run(args)


def run(args: argparse.Namespace) -> int:
    """Measure (profile, runtime), serve the three setups, predict, report."""
    from bench.measure_runtime import measure_runtime, probe_host
    import torch

    torch.set_num_threads(1)
    sys.setswitchinterval(0.001)
    shape = QUICK if args.quick else FULL
    if args.turns is not None:
        shape = replace(shape, turns=args.turns)
    trace = make_trace(shape, args.seed)
    # the calibration trace each setup serves just before the measured one: the same shape, another seed (with
    # fewer turns its contexts were shorter and its load lighter, and its decode pace missed the measured one's
    # by up to 40 %, 2026-12-03 runs j and k: the table's error differs from one region of the grid to another)
    cal_trace = make_trace(shape, args.seed + 1)
    line = LinkShape(args.gbit_per_s, args.rtt_ms, args.jitter_ms, args.loss)
    ec = engine_config(trace)
    t0 = time.monotonic()
    runtime: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        profile = args.profile
        if not args.no_predict:
            if profile is None:
                profile = measure_profile(Path(tmp) / "cpu-profile.json", args.reps, args.profile_rounds)
                print(f"[profile: measured the serve grid in {time.monotonic() - t0:.0f} s]", file=sys.stderr)
            if args.runtime is not None:
                runtime = json.loads(args.runtime.read_text())
            else:
                runtime = measure_runtime(rounds=args.rounds, gbit_per_s=args.gbit_per_s, rtt_ms=args.rtt_ms)
                print(f"[runtime: measured in {runtime['measurements']['seconds']:.0f} s]", file=sys.stderr)
        results = json.loads(args.served.read_text()) if args.served else {}
        table = None if args.no_predict or args.no_calibration else _table(profile)
        for name in [] if args.served else setups():
            before = probe_host(gbit_per_s=line.gbit_per_s)
            cal, results[name], drifts = calibrated_serve(name, trace, cal_trace, line, ec, args.seed, table,
                                                          args.host_retries)
            for _ in range(args.repeats - 1):  # the same trace again: the executor's own spread
                again = serve(name, trace, line, ec, args.seed)
                results[name].setdefault("repeats", []).append(
                    {k: again[k] for k in ("wall_s", "errors", "arrivals", "ttft_s", "tpot_s", "forwards_served")})
            if cal is not None:  # served just before, by the same setup: the paces the simulation takes
                results[name]["calibration"] = {k: cal[k] for k in ("requests", "wall_s", "errors", "forwards_served")}
                results[name]["calibration"]["host_drift"] = drifts
            after = probe_host(gbit_per_s=line.gbit_per_s)  # the cores other work left us, around the serving
            results[name]["slowdown"] = (before["slowdown"] + after["slowdown"]) / 2
            results[name]["speedup"] = [round((a + b) / 2, 3) for a, b in zip(before["speedup"], after["speedup"])]
            results[name]["interference"] = {
                kind: {other: round((v + after["interference"][kind][other]) / 2, 3) for other, v in row.items()}
                for kind, row in before["interference"].items()}
            results[name]["probe_forwards"] = {
                phase: [[*p[:2], (p[2] + q[2]) / 2] for p, q in zip(rows, after["forwards"][phase])]
                for phase, rows in before["forwards"].items()}
            print(f"[{name}: {len(trace)} requests in {results[name]['wall_s']:.1f} s; one thread's slowdown "
                  f"{results[name]['slowdown']:.2f}, speedup of 1-3 threads {results[name]['speedup']}]",
                  file=sys.stderr)
        if args.json and not args.served:
            args.json.with_suffix(".served.json").write_text(json.dumps(results, default=str))
            if profile is not None and args.profile is None:  # to re-predict with --served
                args.json.with_suffix(".profile.json").write_text(profile.read_text())
            if runtime and args.runtime is None:
                args.json.with_suffix(".runtime.json").write_text(json.dumps(runtime, indent=2))
        shape = not args.no_shape
        pred = {} if args.no_predict else predict(trace, results, line, profile, runtime, args.seed, shape)
        if pred and any(r.get("repeats") for r in results.values()):
            pred["chained"] = chained(trace, results, line, profile, runtime, args.seed, shape)
    out = report(results, pred, trace, line, runtime)
    out["runtime"] = runtime
    print(f"\n(bench wall time {time.monotonic() - t0:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    failed = any(r["errors"] or r.get("calibration", {}).get("errors") or any(x["errors"] for x in r.get("repeats", []))
                 for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
