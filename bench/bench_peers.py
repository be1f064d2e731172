"""PDD beside its peers' policies on a real trace: planned and simulated BCR, P90 TTFT, attainment.

    .venv/bin/python bench/bench_peers.py [--rate-scale K] [--requests N] [--time-limit S] [--json]
    .venv/bin/python bench/bench_peers.py --classes [--policies pdd,same-dc-pd,cross-dc-pd,...]

The flagship's hardware (examples/pdd-two-dc.yaml: 96 Ascend-910B in dc-a for P and RLD, 64
GPU-B = H20-class at 1.25 × in dc-b, a 25 Gbit/s line, DeepSeek-V3.2 fp8) serving the bundled
Mooncake conversation trace (tests/data/mooncake_conversation_2000.jsonl: 2,000 requests over
669 s, 13.7K-token prompts on average, 352-token outputs, hits from its 512-token
``hash_ids``) through ``workload.trace``, at ``--rate-scale`` × the trace's own rate. Each
policy — PDD and the baselines ``same-dc-pd``, ``prfaas``, ``agg`` (:mod:`placer.baselines`)
— is solved for BCR, then **replayed in the simulator with the trace itself** (its requests,
lengths and prefix blocks, sped up to the load the plan carries: a plan that carries part of
the load is replayed at that part, and the row says so). Printed per policy: the load carried,
the planned and simulated BCR (SLA requests per USD), P90 TTFT and SLA attainment, and PDD's
ratio to each. Nothing is tuned: the scenario's figures are the flagship's, the load the trace's.

``--classes`` runs the same table on the flagship itself (its 8 classes at 10 req/s, replayed as
i.i.d. requests of the classes): the placer's plan and simulation beside the report's figures
(docs/examples.md, "Side by side with the report").

Issue 45, part 4. The table is copied into docs/examples.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from placer.baselines import solve_baseline
from placer.errors import PlacerError
from placer.optimize import SolveConfig, optimize
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.specs import load_scenario
from placer.workload.trace import read_trace

ROOT = Path(__file__).resolve().parents[1]
FLAGSHIP = ROOT / "examples" / "pdd-two-dc.yaml"
TRACE = ROOT / "tests" / "data" / "mooncake_conversation_2000.jsonl"
POLICIES = ("pdd", "same-dc-pd", "prfaas", "agg")


def trace_rate_rps(path: Path) -> float:
    """The trace's own arrival rate: requests over the span of its timestamps."""
    stamps = [r.timestamp_s for r in read_trace(path)]
    return len(stamps) / max(stamps[-1] - stamps[0], 1e-9)


def scenario(rate_rps: float, trace: Path = TRACE, ttft_p90_s: float | None = None, min_served: float = 1.0):
    """The flagship's hardware, model and SLA with the trace as its workload at ``rate_rps``;
    ``min_served`` < 1 lets every plan (PDD's too) carry only part of the load, as a baseline
    within its inventory does."""
    base = load_scenario(FLAGSHIP)
    workload = {"arrival_rps": rate_rps, "trace": str(trace)}
    sla = base.sla if ttft_p90_s is None else base.sla.model_copy(update={"ttft_p90_s": ttft_p90_s})
    options = base.options.model_copy(update={"min_served_fraction": min_served})
    return base.model_copy(update={"name": "pdd-two-dc-mooncake", "workload": type(base.workload)(**workload),
                                   "sla": sla, "options": options})


def run(rate_scale: float = 1.0, requests: int = 2000, time_limit_s: float = 20.0, seed: int = 0,
        policies: tuple[str, ...] = POLICIES, ttft_p90_s: float | None = None, classes: bool = False,
        min_served: float = 1.0) -> list[dict]:
    native = trace_rate_rps(TRACE)
    rate = native * rate_scale
    problem = resolve(load_scenario(FLAGSHIP) if classes else scenario(rate, ttft_p90_s=ttft_p90_s,
                                                                                   min_served=min_served))
    rate = problem.arrival_rps
    config = SolveConfig("bcr", "ortools", time_limit_s, marginals=False)
    rows = []
    for name in policies:
        row = {"policy": name, "offered_rps": rate}
        start = time.perf_counter()
        try:
            plan = optimize(problem, config) if name == "pdd" else solve_baseline(problem, name, config)
        except PlacerError as err:
            rows.append({**row, "error": f"no plan: {err}"})
            continue
        m = plan.metrics
        row.update(served_rps=m.served_rps, plan_bcr=m.bcr_requests_per_usd, plan_ttft_p90_s=m.ttft_p90_s,
                   plan_attainment=m.sla_attainment, cost_usd_per_h=m.cost_usd_per_h,
                   plan_rld_token_share=m.rld_token_share,
                   roles="+".join(sorted({p.role for p in plan.pools if p.count > 0})))
        # replay the trace at the load this plan carries (its own requests, sped up or slowed)
        scale = max(m.served_rps, 1e-9) / native
        sim_config = SimConfig(requests=requests, seed=seed) if classes else \
            SimConfig(requests=requests, seed=seed, workload="trace", trace=str(TRACE), trace_time_scale=scale)
        try:
            sim = simulate(problem, plan, sim_config)
        except PlacerError as err:
            rows.append({**row, "error": f"simulation: {err}"})
            continue
        row.update(sim_bcr=sim["bcr_requests_per_usd"], sim_ttft_p90_s=sim["ttft_p90_s"],
                   sim_attainment=sim["sla_attainment"], sim_rld_token_share=sim["rld_token_share"],
                   sim_p_hit_rate=sim["p_hit_rate"], seconds=time.perf_counter() - start)
        rows.append(row)
    pdd = next((r for r in rows if r["policy"] == "pdd" and "sim_bcr" in r), None)
    for r in rows:
        if pdd is not None and "sim_bcr" in r and r is not pdd:
            r["pdd_over_it_plan_bcr"] = pdd["plan_bcr"] / r["plan_bcr"] if r["plan_bcr"] else None
            r["pdd_over_it_sim_bcr"] = pdd["sim_bcr"] / r["sim_bcr"] if r["sim_bcr"] else None
            r["pdd_over_it_sim_p90"] = pdd["sim_ttft_p90_s"] / r["sim_ttft_p90_s"] if r["sim_ttft_p90_s"] else None
    return rows


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def table(rows: list[dict]) -> str:
    head = ("| policy | carries req/s | BCR plan | BCR sim | P90 TTFT s plan | P90 TTFT s sim | attainment plan | "
            "attainment sim | PDD/it BCR (sim) | PDD/it P90 (sim) | RLD tokens plan / sim |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r and "sim_bcr" not in r:
            lines.append(f"| {r['policy']} | {r['error'][:160]} |" + " |" * 9)
            continue
        lines.append(
            f"| {r['policy']} ({r['roles']}) | {r['served_rps']:.2f} / {r['offered_rps']:.2f} | {r['plan_bcr']:.1f} | "
            f"{r['sim_bcr']:.1f} | {r['plan_ttft_p90_s']:.2f} | {r['sim_ttft_p90_s']:.2f} | "
            f"{100 * r['plan_attainment']:.0f} % | {100 * r['sim_attainment']:.0f} % | "
            f"{_f(r.get('pdd_over_it_sim_bcr'), '.2f')} | {_f(r.get('pdd_over_it_sim_p90'), '.2f')} | "
            f"{100 * r['plan_rld_token_share']:.1f} % / {100 * r['sim_rld_token_share']:.1f} % |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate-scale", type=float, default=1.0, help="Load as a multiple of the trace's own rate.")
    parser.add_argument("--requests", type=int, default=2000, help="Trace requests replayed per policy.")
    parser.add_argument("--time-limit", type=float, default=20.0, help="Solver time limit per policy, s.")
    parser.add_argument("--ttft", type=float, default=None, help="TTFT P90 SLA, s (default: the flagship's).")
    parser.add_argument("--min-served", type=float, default=1.0,
                        help="options.min_served_fraction: below 1 every plan may carry part of the load.")
    parser.add_argument("--classes", action="store_true", help="The flagship's own classes instead of the trace.")
    parser.add_argument("--policies", default=",".join(POLICIES), help="Comma-separated: pdd and baselines.")
    parser.add_argument("--json", action="store_true", help="Print the rows as JSON.")
    args = parser.parse_args()
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    rows = run(args.rate_scale, args.requests, args.time_limit, ttft_p90_s=args.ttft, policies=policies,
               classes=args.classes, min_served=args.min_served)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
        return
    native = trace_rate_rps(TRACE)
    if args.classes:
        print(f"{FLAGSHIP.name}: its classes at {rows[0]['offered_rps']:g} req/s; {args.requests} requests "
              "replayed per policy")
    else:
        print(f"Mooncake conversation trace ({TRACE.name}, {native:.2f} req/s native) × {args.rate_scale:g} "
              f"on the flagship's hardware; {args.requests} requests replayed per policy")
    print(table(rows))


if __name__ == "__main__":
    main()
