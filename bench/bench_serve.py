"""Serve one agentic trace three ways — same-DC PD, naive cross-DC PD, PDD — over an emulated WAN.

    python bench/bench_serve.py [--quick] [--gbit-per-s 0.2] [--rtt-ms 30] [--jitter-ms 5] [--json OUT]

What runs: the executor's real engines (a tiny seeded Llama whose KV per token is
large — 32 KiB — while its compute stays tiny), real sockets in each datacenter,
and a `LinkEmulator` shaping the line between them (token bucket shared by all
transfers, RTT/2 each way, jitter). Everything runs in this process on CPU.

The trace: conversations that share a long system prefix and come back turn after
turn with their context (high prefix hit), each opened by a low-hit first turn with
a long output, plus a few anomalous long-input, low-hit, short-output requests.
The same trace (same prompts, same arrival times) is served by:

- same-dc-pd: P and D in dc-a (the KV never crosses the WAN) — the lower bound;
- cross-dc-pd ("naive"): P in dc-a, D in dc-b, every request P → D over the line.
  D keeps a radix cache (ships only what it lacks), so naive here differs from PDD
  only in the relay and the filter;
- pdd: P and RLD in dc-a, MD in dc-b; the router sends high-hit requests P → MD,
  low-hit ones P → RLD → MD (token-ID handoff), anomalous ones P → RLD only.

Prints TTFT P50/P90/P99 of each (client side, at the router), the PDD / naive P90
ratio, the handoff's token-ID bytes vs the KV bytes they replace, handoff latency,
and the planner's (`placer.optimize.evaluate_plan`) and simulator's (`placer.sim`)
predicted TTFT for the same setting with their error. `--quick` is a smaller run
of the same comparison (under a minute).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from executor.cluster import LocalCluster
from executor.config import ServingConfig
from executor.engine import Engine, EngineConfig, ModelConfig, SamplingParams
from executor.handoff import HandoffPolicy
from executor.placement import InstanceSpec
from executor.routing import Pipeline, RoutingPolicy
from executor.transport.shaping import LinkShape

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
    first_user_tokens: tuple[int, int] = (900, 1100)  # a new conversation's own context
    turn_tokens: tuple[int, int] = (24, 56)  # what each later turn appends (reply + tool output)
    new_output_tokens: int = 96  # first turns: long answers (RLD is still decoding at the handoff)
    turn_output_tokens: int = 16
    anomalous_tokens: int = 1300
    anomalous_output_tokens: int = 4
    stagger_s: float = 1.2  # between conversation starts
    think_s: float = 2.0  # between turns of one conversation


QUICK = TraceConfig(conversations=3, turns=4, anomalous=1, new_output_tokens=80, turn_output_tokens=8,
                    stagger_s=0.8, think_s=0.8)
FULL = TraceConfig(conversations=6, turns=7, anomalous=3)


@dataclass(frozen=True)
class TraceRequest:
    t_s: float  # turn 0 and anomalous: arrival time; later turns: think time after the previous answer
    prompt: tuple[int, ...]
    max_tokens: int
    kind: str  # new | turn | anomalous
    hit_estimate: float  # what an ideal prefix cache would hold (for the planner's classes)
    conv: int = -1  # conversation (-1: a lone anomalous request)
    turn: int = 0


def make_trace(cfg: TraceConfig, seed: int) -> list[TraceRequest]:
    """Conversations (turn k+1 comes `think_s` after turn k's answer ended) and lone anomalous requests."""
    rng = random.Random(seed)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(256) for _ in range(n)]

    shared = [256, *tokens(cfg.shared_tokens)]
    out: list[TraceRequest] = []
    for c in range(cfg.conversations):
        start = 0.2 + c * cfg.stagger_s
        context = shared + tokens(rng.randint(*cfg.first_user_tokens))
        out.append(TraceRequest(start, tuple(context), cfg.new_output_tokens, "new", len(shared) / len(context), c, 0))
        for k in range(1, cfg.turns):
            before = len(context)
            context = context + tokens(rng.randint(*cfg.turn_tokens))
            out.append(TraceRequest(cfg.think_s, tuple(context), cfg.turn_output_tokens, "turn",
                                    before / len(context), c, k))
    span = cfg.conversations * cfg.stagger_s + cfg.turns * cfg.think_s
    for a in range(cfg.anomalous):
        prompt = shared + tokens(cfg.anomalous_tokens)
        t = span * (a + 0.5) / (cfg.anomalous + 0.5)
        out.append(TraceRequest(t, tuple(prompt), cfg.anomalous_output_tokens, "anomalous",
                                len(shared) / len(prompt)))
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
                RoutingPolicy(direct_min_hit_rate=0.8, **FILTER)),
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


def serve(name: str, trace: list[TraceRequest], line: LinkShape, ec: EngineConfig, seed: int) -> dict:
    specs, policy = setups()[name]
    links = {frozenset(("dc-a", "dc-b")): line}
    config = ServingConfig(routing=policy, handoff=HandoffPolicy("adaptive", 64), links=links, heartbeat_s=None,
                           request_timeout_s=300)
    with LocalCluster(specs, MODEL, ec, config, transport="tcp", link_seed=seed) as cluster:
        t0 = time.monotonic()
        streams, arrivals = replay(cluster.router, trace)
        wall_s = time.monotonic() - t0
        stats = cluster.stats()
    errors = [s.error for s in streams if s is None or s.error]
    records = [s.record if s is not None else None for s in streams]
    ttft = [r.ttft_s for r in records if r is not None and r.ttft_s is not None]
    by_kind: dict[str, list[float]] = {}
    for req, r in zip(trace, records):
        if r is not None and r.ttft_s is not None:
            by_kind.setdefault(req.kind, []).append(r.ttft_s)
    handoffs = [r.extra for r in records if r is not None and "handoff_latency_s" in r.extra]
    link = stats["links"].get("dc-a<->dc-b", {}).get("dc-a->dc-b", {})
    return {
        "setup": name, "requests": len(trace), "errors": errors, "wall_s": wall_s, "arrivals": arrivals,
        "ttft_s": ttft, "ttft_by_kind": by_kind,
        "outputs": [s.tokens if s is not None else None for s in streams],
        "pipelines": {p: sum(1 for r in records if r is not None and r.pipeline == p)
                      for p in sorted({r.pipeline for r in records if r is not None})},
        "prefix_hit": [r.prefix_hit_tokens / r.input_tokens for r in records if r is not None],
        "drc_hit": [r.extra.get("md_cached_tokens", 0) / r.input_tokens for r in records
                    if r is not None and "md_cached_tokens" in r.extra],
        "wan_bytes": link.get("bytes", 0),
        "handoffs": handoffs,
        "rld_tokens": sum(r.extra.get("relay_tokens", 0) for r in records if r is not None
                          and r.pipeline in ("P-RLD-MD", "P-RLD")),
        "output_tokens": sum(r.output_tokens for r in records if r is not None),
    }


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


# ---- predictions -----------------------------------------------------------------------------------


def calibrate(ec: EngineConfig) -> dict[str, float]:
    """Measured engine timings (cold prefill, warm extend, decode step) at the trace's sizes."""
    eng = Engine.from_seed(MODEL, ec, seed=0, device="cpu")
    rng = random.Random(1)
    sp = SamplingParams(max_new_tokens=64, stop_at_eos=False)
    cold_n = 1200
    times = []
    for _ in range(2):
        prompt = [rng.randrange(256) for _ in range(cold_n)]
        t0 = time.perf_counter()
        res = eng.prefill(prompt, sp)
        times.append(time.perf_counter() - t0)
    t_cold = min(times)
    t0 = time.perf_counter()
    for _ in range(10):
        eng.decode_step([res.request])
    t_dec = (time.perf_counter() - t0) / 10
    eng.finish(res.request)
    return {"prefill_tokens": cold_n, "prefill_s": t_cold, "decode_context": cold_n + 5, "decode_step_s": t_dec}


def _bisect(f, lo: float, hi: float, target: float) -> float:
    """x in [lo, hi] (log scale) with f(x) ≈ target, f decreasing."""
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def scenario_and_plans(trace: list[TraceRequest], arrivals: list[float], line: LinkShape, cal: dict[str, float]):
    """The bench setting as a placer scenario (a 'CPU' chip fitted to the measured engine) and the three plans."""
    from placer.catalog import Chip
    from placer.catalog import ModelConfig as PModel
    from placer.perfmodel import InstanceModel
    from placer.plan import Plan
    from placer.specs import parse_scenario

    n_params = sum(math.prod(s) for s in _weight_shapes())
    # fp32 KV in the engine = bf16 KV of twice the head_dim in the planner's model (same bytes per token)
    model = {"name": "bench-tiny", "attn": "gqa", "layers": MODEL.num_layers, "hidden": MODEL.hidden_size,
             "q_heads": MODEL.num_q_heads, "kv_heads": MODEL.num_kv_heads, "head_dim": 2 * MODEL.head_dim,
             "params_total_b": n_params / 1e9, "params_active_b": n_params / 1e9}
    pm = PModel(**model)
    base = Chip("CPU", "custom", 1.0, None, 8.0, 0.01, 400.0, 2.0, 100.0, 1.0, 1.0, 1.0, 1.0)

    def prefill_s(tflops: float) -> float:
        return InstanceModel(base.with_changes(bf16_tflops=tflops), 1, pm, "bf16", "bf16").prefill_s(
            cal["prefill_tokens"], 0.0)

    tflops = _bisect(prefill_s, 1e-6, 1e3, cal["prefill_s"])

    def step_s(tbps: float) -> float:
        return InstanceModel(base.with_changes(bf16_tflops=tflops, mem_bw_tbps=tbps), 1, pm, "bf16",
                             "bf16").step_s(1, cal["decode_context"])

    tbps = _bisect(step_s, 1e-6, 1e3, cal["decode_step_s"])
    chip = {"name": "CPU", "bf16_tflops": tflops, "mem_gb": 8.0, "mem_bw_tbps": tbps, "price_usd_per_h": 1.0,
            "nic_gbit": 2.0, "compute_efficiency": 1.0, "mem_bw_efficiency": 1.0}
    seen = [a for a in arrivals if not math.isnan(a)]
    span = max(seen) - min(seen)
    classes = []
    for kind in ("new", "turn", "anomalous"):
        group = [r for r in trace if r.kind == kind]
        if group:
            classes.append({"name": kind, "share": len(group) / len(trace),
                            "input_tokens": round(statistics.mean(len(r.prompt) for r in group)),
                            "output_tokens": round(statistics.mean(r.max_tokens for r in group)),
                            "hit_rate": statistics.mean(r.hit_estimate for r in group)})
    shares = sum(c["share"] for c in classes)
    classes[-1]["share"] += 1.0 - shares
    scenario = parse_scenario({
        "name": "bench-serve", "model": model, "kv_dtype": "bf16", "weight_dtype": "bf16", "chips": [chip],
        "datacenters": [{"name": "dc-a", "inventory": {"CPU": 4}}, {"name": "dc-b", "inventory": {"CPU": 4}}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": line.gbit_per_s, "rtt_ms": line.rtt_ms,
                   "jitter_ms": line.jitter_ms}],
        "workload": {"arrival_rps": len(trace) / max(span, 1e-3), "classes": classes},
        "sla": {"ttft_p90_s": 60.0, "tpot_s": 1.0},  # loose: we compare latencies, not SLA
        "options": {"tp_degrees": [1], "utilization_cap": 0.95, "link_utilization_cap": 0.95,
                    "catch_up_threshold_tokens": 64, **FILTER},
    })
    pool = lambda role, dc: {"role": role, "datacenter": dc, "chip": "CPU", "tp": 1, "count": 1}
    route = lambda cls, pipe, dst: {"request_class": cls, "pipeline": pipe, "src": "dc-a", "dst": dst,
                                    "rps": scenario.workload.arrival_rps * next(c["share"] for c in classes
                                                                                if c["name"] == cls)}
    names = [c["name"] for c in classes]
    pdd_pipe = {"new": ("P-RLD-MD", "dc-b"), "turn": ("P-MD", "dc-b"), "anomalous": ("P-RLD", "dc-a")}
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
    return scenario, plans, {"bf16_tflops": tflops, "mem_bw_tbps": tbps}


def _weight_shapes():
    from executor.engine.model import weight_shapes

    return weight_shapes(MODEL).values()


def predict(trace: list[TraceRequest], results: dict[str, dict], line: LinkShape, cal: dict[str, float],
            seed: int) -> dict:
    """Each setup's TTFT P50/P90/P99 by the planner and by the simulator, at the arrivals it saw."""
    out: dict = {"planner": {}, "simulator": {}, "notes": []}
    try:
        from placer.optimize import SolveConfig, evaluate_plan
    except ImportError as exc:
        out["notes"].append(f"planner unavailable: {exc}")
        return out
    try:
        from placer.sim import SimConfig, simulate
    except ImportError:
        simulate = None
        out["notes"].append("simulator unavailable (placer.sim is not installed)")
    for name, res in results.items():
        try:
            scenario, plans, fitted = scenario_and_plans(trace, res["arrivals"], line, cal)
            out["chip_fit"] = fitted
        except Exception as exc:  # the prediction is advisory: report, never fail the bench
            out["notes"].append(f"scenario for {name} could not be built: {type(exc).__name__}: {exc}")
            continue
        plan = plans[name]
        try:
            m = evaluate_plan(scenario, plan, SolveConfig(time_limit_s=20)).metrics
            out["planner"][name] = (m.ttft_p50_s, m.ttft_p90_s, m.ttft_p99_s)
        except Exception as exc:
            out["notes"].append(f"planner, {name}: {type(exc).__name__}: {exc}")
        if simulate is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.jsonl"
            rows = sorted((a, r) for a, r in zip(res["arrivals"], trace) if not math.isnan(a))
            path.write_text("".join(json.dumps({"timestamp": round(a * 1000), "input_length": len(r.prompt),
                                                "output_length": r.max_tokens, "hit_rate": r.hit_estimate}) + "\n"
                                    for a, r in rows))
            try:
                sim = simulate(scenario, plan, SimConfig(requests=len(rows), seed=seed, workload="trace",
                                                         trace=str(path), warmup_fraction=0.0))
                out["simulator"][name] = (sim["ttft_p50_s"], sim["ttft_p90_s"], sim["ttft_p99_s"])
            except Exception as exc:
                out["notes"].append(f"simulator, {name}: {type(exc).__name__}: {exc}")
    return out


# ---- report ------------------------------------------------------------------------------------------


def report(results: dict[str, dict], pred: dict, trace: list[TraceRequest], line: LinkShape, cal: dict) -> dict:
    kinds = {k: sum(r.kind == k for r in trace) for k in ("new", "turn", "anomalous")}
    print(f"trace: {len(trace)} requests ({kinds['turn']} later turns, high hit; {kinds['new']} new conversations "
          f"and {kinds['anomalous']} anomalous, low hit); KV {MODEL.kv_bytes_per_token // 1024} KiB/token")
    print(f"line dc-a<->dc-b: {line.gbit_per_s * 1000:g} Mbit/s, RTT {line.rtt_ms:g} ms, jitter {line.jitter_ms:g} ms;"
          f" a 1000-token uncached KV takes {line.transfer_estimate_s(1000 * MODEL.kv_bytes_per_token):.2f} s")
    print(f"engine (measured): prefill {cal['prefill_tokens']} tokens {cal['prefill_s'] * 1000:.0f} ms, "
          f"decode step {cal['decode_step_s'] * 1000:.1f} ms")
    print()
    print(f"{'setup':<13} {'TTFT P50':>9} {'P90':>8} {'P99':>8}   {'WAN MB':>7}  pipelines / by kind (P50 s)")
    summary: dict = {}
    for name, r in results.items():
        t = r["ttft_s"]
        p = (pct(t, 50), pct(t, 90), pct(t, 99))
        summary[name] = p
        kinds_txt = ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in r["ttft_by_kind"].items())
        print(f"{name:<13} {p[0]:>8.3f}s {p[1]:>7.3f}s {p[2]:>7.3f}s   {r['wan_bytes'] / 1e6:>7.1f}  "
              f"{r['pipelines']}; {kinds_txt}" + (f"  ERRORS {len(r['errors'])}" if r["errors"] else ""))
    ratio = summary["pdd"][1] / summary["cross-dc-pd"][1]
    print(f"\nPDD / naive cross-DC P90 TTFT: {ratio:.2f} (target <= 0.5; TTFT {100 * (ratio - 1):+.1f} %)")
    same = [results[n]["outputs"] == results["same-dc-pd"]["outputs"] for n in results]
    print(f"outputs identical across setups (greedy): {all(same)}")
    ho = results["pdd"]["handoffs"]
    out: dict = {"ttft": summary, "p90_ratio": ratio, "outputs_identical": all(same)}
    if ho:
        ids = sum(h["handoff_msg_bytes"] for h in ho)
        kv = sum(h["handoff_kv_bytes_replaced"] for h in ho)
        lat = [h["handoff_latency_s"] for h in ho]
        modes = {m: sum(h["handoff_mode"] == m for h in ho) for m in ("one-shot", "catch-up")}
        toks = [h["handoff_tokens"] for h in ho]
        print(f"handoffs: {len(ho)} ({modes}); tokens handed over per request: mean {statistics.mean(toks):.0f}, "
              f"max {max(toks)}")
        print(f"  token-ID bytes {ids:,} vs the KV they replace {kv:,} bytes: {kv / ids:,.0f}x smaller "
              f"(target >= 1,000x)")
        std = statistics.pstdev(lat) if len(lat) > 1 else 0.0
        print(f"  handoff latency (final batch sent -> MD streams on): mean {1000 * statistics.mean(lat):.1f} ms, "
              f"max {1000 * max(lat):.1f} ms, std {1000 * std:.1f} ms")
        out["handoff"] = {"count": len(ho), "modes": modes, "id_bytes": ids, "kv_bytes": kv, "ratio": kv / ids,
                          "latency_mean_s": statistics.mean(lat), "latency_max_s": max(lat), "latency_std_s": std}
    else:
        print("handoffs: none happened (every relayed request finished on RLD before MD had its KV)")
    pdd = results["pdd"]
    if pdd["output_tokens"]:
        print(f"RLD share of output tokens (PDD): {100 * pdd['rld_tokens'] / pdd['output_tokens']:.1f} %")
    print("\npredicted TTFT P50 / P90 / P99 (s) and error vs measured:")
    for source in ("planner", "simulator"):
        for name in results:
            got = pred.get(source, {}).get(name)
            if got is None:
                continue
            meas = summary[name]
            err = "  ".join(f"{100 * (g - m) / m:+.0f}%" if m > 0 else "n/a" for g, m in zip(got, meas))
            print(f"  {source:<9} {name:<12} {got[0]:>6.3f} {got[1]:>6.3f} {got[2]:>6.3f}   error {err}")
    if pred.get("chip_fit"):
        f = pred["chip_fit"]
        print(f"  (the 'CPU' chip fitted to the engine: {f['bf16_tflops'] * 1000:.3f} GFLOP/s-eq, "
              f"{f['mem_bw_tbps'] * 1000:.2f} GB/s)")
    for note in pred.get("notes", []):
        print(f"  note: {note}")
    out["predicted"] = {k: pred.get(k) for k in ("planner", "simulator")}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller trace (under a minute)")
    ap.add_argument("--gbit-per-s", type=float, default=0.2, help="line rate (default 200 Mbit/s)")
    ap.add_argument("--rtt-ms", type=float, default=30.0)
    ap.add_argument("--jitter-ms", type=float, default=5.0)
    ap.add_argument("--loss", type=float, default=0.0, help="packet loss probability on the line")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-predict", action="store_true", help="skip the planner and simulator predictions")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    sys.setswitchinterval(0.001)
    trace = make_trace(QUICK if args.quick else FULL, args.seed)
    line = LinkShape(args.gbit_per_s, args.rtt_ms, args.jitter_ms, args.loss)
    ec = engine_config(trace)
    t0 = time.monotonic()
    cal = calibrate(ec)
    results = {}
    for name in setups():
        results[name] = serve(name, trace, line, ec, args.seed)
        print(f"[{name}: {len(trace)} requests in {results[name]['wall_s']:.1f} s]", file=sys.stderr)
    pred = {} if args.no_predict else predict(trace, results, line, cal, args.seed)
    out = report(results, pred, trace, line, cal)
    print(f"\n(bench wall time {time.monotonic() - t0:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    failed = any(r["errors"] for r in results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
