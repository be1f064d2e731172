"""A plan from a trace's fitted classes against replaying the trace itself (issue 42, part 2).

    PYTHONPATH=. .venv/bin/python bench/bench_trace_fit.py [--trace tests/data/mooncake_conversation_2000.jsonl]
        [--speed 1.0] [--requests 20000] [--seed 7] [--time-limit 60] [--prefix-cache-tokens N] [--replays 8]

One scenario (Llama-3.1-70B fp8 on two datacenters of H100, 25 Gbit/s between them, TTFT P90
SLA 3 s) takes its workload from the trace at the trace's own rate × ``--speed``. Its classes
are fitted twice: as before issue 42 (hit buckets, each class its means: ``tail_tolerance`` 1,
``routing_rounds`` 0 and no spread) and as now (:func:`placer.workload.fit.fit_classes`: classes cut by new tokens
until they keep 95 % of E[new²], each with its within-class spread). For each, the optimal
plan's promise (:func:`placer.evaluate.analyze`), the simulator on requests drawn from the
classes, and the simulator replaying the trace (``placer simulate --trace``, at the same
speed; ``--replays`` replays pooled, their spread printed: ``bench/pooled_seeds.py``) are printed: TTFT P90,
SLA attainment and goodput. ``--prefix-cache-tokens``: the hits
are counted under an LRU prefix cache of that size (``workload.prefix_cache_tokens``) on both
sides — the fit's and the replay's P-side store (``SimConfig.prefix_cache_blocks``); default the
unbounded cache, the trace's ideal.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from placer.evaluate import analyze
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.specs import parse_scenario
from placer.workload.fit import fit_classes, trace_arrival_rps
from placer.workload.trace import read_trace, with_hit_rates
from pooled_seeds import TRACE_LEAST as REPLAYS, pooled_runs as pooled_replay  # a sibling under bench/

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "tests" / "data" / "mooncake_conversation_2000.jsonl"


def scenario(classes: list[dict], rps: float) -> dict:
    return {"name": "trace-fit", "model": "llama-3.1-70b", "weight_dtype": "fp8", "kv_dtype": "fp8",
            "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 64}},
                            {"name": "dc-b", "inventory": {"H100-SXM": 64}}],
            "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 25, "rtt_ms": 20, "jitter_ms": 2}],
            "workload": {"arrival_rps": rps, "classes": classes},
            "sla": {"ttft_p90_s": 3.0, "tpot_s": 0.05}, "options": {"tp_degrees": [2, 4, 8]}}


def fitted(trace: Path, tails: bool, cache_tokens: int | None = None) -> list[dict]:
    records = list(with_hit_rates(read_trace(trace), cache_tokens))
    if tails:
        return [c.model_dump() for c in fit_classes(records)]
    return [c.model_dump() | {"new_tokens_cv2": 0.0, "output_tokens_cv2": 0.0}
            for c in fit_classes(records, tail_tolerance=1.0, routing_rounds=0)]


def run(trace: Path, speed: float, requests: int, seed: int, time_limit_s: float, tails: bool,
        cache_tokens: int | None = None, replays: int = REPLAYS) -> None:
    start = time.perf_counter()
    rps = trace_arrival_rps(trace) * speed
    problem = resolve(parse_scenario(scenario(fitted(trace, tails, cache_tokens), round(rps, 4))))
    plan = optimize(problem, SolveConfig(marginals=False, time_limit_s=time_limit_s))
    m = analyze(problem, plan).metrics
    flat_p90 = None
    if tails:  # the same plan with the spread left inside the classes ignored: what the spread adds
        spread_off = [c | {"new_tokens_cv2": 0.0} for c in fitted(trace, True, cache_tokens)]
        flat_p90 = analyze(resolve(parse_scenario(scenario(spread_off, round(rps, 4)))), plan).metrics.ttft_p90_s
    by_class = simulate(problem, plan, SimConfig(requests=requests, seed=seed))
    blocks = None if cache_tokens is None else cache_tokens // 512
    replay, spread = pooled_replay(problem, plan, SimConfig(requests=requests, seed=seed, workload="trace",
                                                            trace=str(trace), trace_time_scale=speed,
                                                            prefix_cache_blocks=blocks), replays)
    label = "tails kept (now)" if tails else "means only (before)"
    mean_hit = sum(c.share * c.hit_rate * c.input_tokens for c in problem.classes) / sum(
        c.share * c.input_tokens for c in problem.classes)
    print(f"== {label}: {len(problem.classes)} classes, hit {mean_hit:.3f}, {rps:.2f} req/s, "
          f"{plan.metrics.cost_usd_per_h:.0f} USD/h [{time.perf_counter() - start:.0f} s]")
    for name, p90, att, good in (
            ("plan's promise", m.ttft_p90_s, m.sla_attainment, m.goodput_rps),
            ("sim, classes", by_class["ttft_p90_s"], by_class["sla_attainment"], by_class["goodput_rps"]),
            ("sim, trace replay", replay["ttft_p90_s"], replay["sla_attainment"], replay["goodput_rps"])):
        print(f"   {name:18s} TTFT P90 {p90:8.3f} s  attainment {att:6.1%}  goodput {good:6.2f} req/s")
    print(f"   (the trace replay: {spread.line()})")
    if flat_p90 is not None:
        print(f"   (the promise without the spread left inside the classes: TTFT P90 {flat_p90:.3f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--speed", type=float, default=1.0, help="replay speed-up (and the planned load's factor)")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--prefix-cache-tokens", type=int, default=None, help="LRU prefix cache (default: unbounded)")
    parser.add_argument("--replays", type=int, default=REPLAYS,
                        help="trace replays pooled (seeds --seed …; bench/pooled_seeds.py)")
    args = parser.parse_args()
    for tails in (False, True):
        run(args.trace, args.speed, args.requests, args.seed, args.time_limit, tails, args.prefix_cache_tokens,
            args.replays)


if __name__ == "__main__":
    main()
