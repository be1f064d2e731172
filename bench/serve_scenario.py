"""bench_serve's planner inputs: the CPU profile, the bench setting as a placer scenario and the three plans.

in:  the trace and the arrivals a setup saw, the line, the CPU profile of the bench model (a ChipProfile JSON),
     the runtime figures (``bench/measure_runtime.py``)
out: :func:`measure_profile` (``placer profile model --device cpu --grid serve``), :func:`scenario_and_plans`,
     :func:`local_kv_gbit` (the executor's own KV copy rate as the chip's NIC), and the paces of forwards
     against the profile's table (:func:`probe_paces`, :func:`served_paces`).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from bench.serve_trace import CLASSES, FILTER, MODEL, TraceRequest, request_class
from executor.transport.shaping import LinkShape


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
                       nic_gbit: float = NIC_GBIT, role_profiles: dict[str, Path] | None = None):
    """The bench setting as a placer scenario (its chip and model from the CPU profile, the
    profile's measured table as the performance model) and the three plans. ``nic_gbit``: the chip's NIC,
    which prices a KV's move inside a datacenter (P → D in same-dc-pd, P → RLD in pdd): the executor's
    own copy rate (:func:`local_kv_gbit`) — at 2 Gbit/s a 1,300-token prompt's 43 MB took the planner
    0.17 s where the executor copies it in ~12 ms. ``role_profiles``: a profile per pool role (P, RLD, MD),
    each its own chip (its table's chip name), where the instances of a deployment got the chip apart
    (``served_forwards.deployed_paces_by_instance``); a role without one takes ``profile``."""
    from placer.plan import Plan
    from placer.specs import parse_scenario
    from placer.workload.arrivals import interarrival_cv2

    paths = {role: (role_profiles or {}).get(role, profile) for role in ("P", "RLD", "MD")}
    chips: dict[Path, dict] = {}
    for path in dict.fromkeys(paths.values()):
        raw = json.loads(path.read_text())
        table = raw["tables"][0]
        model = table["model_shape"]["scenario_model"]
        roof = raw["rooflines"]
        # the CPU as a chip: the profiler's (generous) rooflines as its peaks — used outside the
        # table's grid only, and to refuse a table faster than the hardware
        flops = max(roof["flop_per_s"].values())
        chips[path] = {"name": table["chip"], "bf16_tflops": flops / 1e12, "mem_gb": 8.0,
                       "mem_bw_tbps": roof["mem_bw_bytes_per_s"] / 1e12, "price_usd_per_h": 1.0, "nic_gbit": nic_gbit}
    role_chip = {role: chips[path]["name"] for role, path in paths.items()}
    seen = [a for a in arrivals if not math.isnan(a)]
    span = max(seen) - min(seen)
    classes = []
    for kind in CLASSES:  # the short and the long conversations apart: a class is one size, not a mix of two
        group = [r for r in trace if request_class(r) == kind]
        if group:
            classes.append({"name": kind, "share": len(group) / len(trace),
                            "input_tokens": round(statistics.mean(len(r.prompt) for r in group)),
                            "output_tokens": round(statistics.mean(r.max_tokens for r in group)),
                            "hit_rate": statistics.mean(r.hit_estimate for r in group),
                            # the spread the class holds (a conversation's prompts grow turn by turn)
                            "new_tokens_cv2": _cv2([(1.0 - r.hit_estimate) * len(r.prompt) for r in group]),
                            "output_tokens_cv2": _cv2([r.max_tokens for r in group])})
    shares = sum(c["share"] for c in classes)
    classes[-1]["share"] += 1.0 - shares
    inventory = {c["name"]: 4 for c in chips.values()}
    scenario = parse_scenario({
        "name": "bench-serve", "model": model, "kv_dtype": "bf16", "weight_dtype": "bf16", "chips": list(chips.values()),
        "profiles": [str(path) for path in chips],
        "datacenters": [{"name": "dc-a", "inventory": inventory}, {"name": "dc-b", "inventory": dict(inventory)}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": line.gbit_per_s, "rtt_ms": line.rtt_ms,
                   "jitter_ms": line.jitter_ms}],
        # the arrivals' variability as served (turns follow their predecessor's answer: more regular than Poisson)
        "workload": {"arrival_rps": len(trace) / max(span, 1e-3), "classes": classes,
                     "arrival_cv2": interarrival_cv2(seen)},
        "sla": {"ttft_p90_s": 60.0, "tpot_s": 1.0},  # loose: we compare latencies, not SLA
        "options": {"tp_degrees": [1], "utilization_cap": 0.95, "link_utilization_cap": 0.95,
                    "catch_up_threshold_tokens": 64, **FILTER},
    })
    pool = lambda role, dc: {"role": role, "datacenter": dc, "chip": role_chip[role], "tp": 1, "count": 1}
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


def _cv2(values: list[float]) -> float:
    """Variance / mean² of ``values`` (0 for one value or a zero mean)."""
    mean = statistics.mean(values)
    return statistics.pvariance(values) / (mean * mean) if len(values) > 1 and mean > 0 else 0.0


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
