"""``bench_agreement.py --random N``: solve, simulate and summarise random scenarios (issue 42, part 4).

in:  N, a seed, simulated requests a scenario, the solver's seconds a scenario and, optionally, a
     plans directory: each scenario is solved once and its loaded scenario and plan JSON kept there
     (``<name>.json``: the scenario dict after :func:`at_load`, the plan or the reason it was
     skipped, and a fingerprint of the drawn scenario and the time limit); a later run with the same
     directory simulates the same plans again, so a before/after comparison on a loaded host pairs
     its runs instead of mixing in the solver's time-limit noise (the plan's promise is evaluated
     afresh by :func:`placer.sim.verify.agreement` on each run)
     (``--pools``: :mod:`agreement_pools`, each decode pool's batch, planned and simulated; ``--queues``:
     :mod:`agreement_queues`, each P queue's law beside its instances and each class's TTFT P90 with and
     without the decoders' KV wait; ``steady``, the default: the runs warm up past the decode pools' fill)
out: printed: one line a scenario (kind, pools' pipelines, ILP and simulated P90 and goodput,
     seconds; its simulated figures pool runs of the bench's seed and the next ones until their P90's jackknife
     error is under 3 %, :mod:`pooled_seeds`: the seeds used, and their spread under it where more than 2 were
     needed; a trace scenario's lines: each one's KV load as the plan counts it and at
     what the far decoders hold, :func:`line_loads`), the count skipped and why, then :func:`summary` rows — the distribution of the
     relative error (simulated / ILP − 1) of TTFT P90 and goodput over the scenarios' mixes,
     per pipeline and per pool type (routes whose P pool is in the destination's datacenter,
     "same-dc", or across a line, "over-line"). Routes with under 200 simulated requests are
     left out of the per-route rows (their P90 is noise). Then each route row beyond 10 % (:func:`agreement_routes.print_off_routes`):
     its classes and P pools, its error beside its P90's standard error (``noise``) and one run's span beside the
     relaxation time of its P queues and line (``window``: the run read their transient from empty).
     A drawn run is lengthened to warm up over that relaxation and measure two (:func:`agreement_routes.window_config`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import statistics
import time
from collections import defaultdict
from pathlib import Path

from agreement_pools import pool_rows, print_pools, simulate_pools, steady_config  # siblings under bench/
from agreement_queues import print_queues, print_routes, simulate_queues
from agreement_routes import MIN_ROUTE_REQUESTS, print_off_routes, route_laws, window_config
from random_scenarios import load_fraction, random_scenario
from pooled_seeds import pooled_runs
from placer import decode_rounds
from placer.errors import InfeasiblePlanError, PlacerError
from placer.optimize import SolveConfig, optimize
from placer.plan import Plan, parse_plan
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.sim.verify import agreement
from placer.specs import parse_scenario
from placer.pdd import P_D
from placer.workload.decode_hits import destination_shares, routed_decode_hits, with_held_hits
from placer.workload.fit import trace_arrival_rps
from placer.workload.trace import read_trace

def summary(errors: list[float]) -> str:
    """median |e|, P90 |e|, max |e|, share within 10 %, count beyond 25 % of relative errors."""
    vals = sorted(abs(e) for e in errors if e is not None and math.isfinite(e))
    if not vals:
        return "n=0"
    p90 = vals[min(len(vals) - 1, math.ceil(0.9 * len(vals)) - 1)]
    within = sum(v <= 0.10 for v in vals) / len(vals)
    beyond = sum(v > 0.25 for v in vals)
    return (f"n={len(vals):3d}  median {statistics.median(vals):6.1%}  P90 {p90:7.1%}  max {vals[-1]:8.1%}  "
            f"within 10% {within:5.0%}  beyond 25% {beyond:3d}")


def at_load(data: dict, fraction: float) -> dict:
    """``data`` with its arrival rate at ``fraction`` of the most its pools carry within the SLA
    (the LP relaxation of the plan's formulation, :func:`placer.ilp.dinkelbach._max_carry`, with
    the load's upper bound lifted 4× above the scenario's rough scale so the hardware binds)."""
    from placer.ilp.dinkelbach import _max_carry
    from placer.ilp.formulation import build, pdd_architecture

    probe = copy.deepcopy(data)
    probe["workload"]["arrival_rps"] = data["workload"]["arrival_rps"] * 4
    problem = resolve(parse_scenario(probe))
    carry = _max_carry(build(problem, pdd_architecture(problem), "bcr"), with_sla=True)
    if carry <= 0:
        raise InfeasiblePlanError("no load is carried within the SLA (LP relaxation)")
    out = copy.deepcopy(data)
    out["workload"]["arrival_rps"] = round(fraction * carry, 4)
    return out


def sim_config(data: dict, requests: int, seed: int) -> SimConfig:
    """Requests drawn from the classes; a trace scenario replays its trace at the scenario's rate."""
    trace = data["workload"].get("trace")
    if not trace:
        return SimConfig(requests=requests, seed=seed)
    scale = data["workload"]["arrival_rps"] / trace_arrival_rps(trace)
    return SimConfig(requests=requests, seed=seed, workload="trace", trace=trace, trace_time_scale=scale)


def line_loads(data: dict, problem, plan, seed: int) -> list[tuple[str, str, float, float, float]]:
    """A trace scenario's lines: (src, dst, capacity, KV Gbit/s the plan counts, KV Gbit/s at the hit its
    destination's decoders hold) of its crossing routes. The plan counts the uncached part of each prompt at the
    hit it priced (``problem.decode_hit``: P's store's, or what the plan's own routing leaves the decoders holding;
    ``placer.flows.Route.wan_bytes``); the trace routed as the plan splits it
    (:func:`placer.workload.decode_hits.routed_decode_hits`) says what the far decoders hold."""
    classes = {c.name: c for c in problem.classes}
    hits = routed_decode_hits(read_trace(data["workload"]["trace"]), problem.classes, destination_shares(plan), seed)
    kv = problem.kv_bytes_per_token * 8 / 1e9
    loads: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in plan.routes:
        c, h = classes[r.request_class], hits.get((r.request_class, r.dst))
        if r.src == r.dst or r.rps <= 0:
            continue
        drc = problem.options.drc and r.pipeline != P_D
        loads[(r.src, r.dst)][0] += r.rps * (1.0 - problem.decode_hit(c, r.dst) if drc else 1.0) * c.input_tokens * kv
        if h is not None and h.requests and drc:  # the requests sent there, at what the decoders held of them
            loads[(r.src, r.dst)][1] += r.rps * (1.0 - h.decode_hit) * h.input_tokens / h.requests * kv
        else:  # none drawn there: the class's prompts at the share the decoders there hold (no DRC: all of them)
            held = (h.held if h is not None else c.hit_rate) if drc else 0.0
            loads[(r.src, r.dst)][1] += r.rps * (1.0 - held) * c.input_tokens * kv
    return [(s, d, problem.links[(s, d)].gbit_per_s, *v) for (s, d), v in sorted(loads.items())]


def _fingerprint(data: dict, time_limit_s: float) -> str:
    """What a cached plan was solved from: the drawn scenario (before its load is set; a trace by its file
    name, so another checkout's copy of the repository reads the same cache) and the time limit."""
    data = copy.deepcopy(data)
    if data["workload"].get("trace"):
        data["workload"]["trace"] = Path(data["workload"]["trace"]).name
    text = json.dumps({"scenario": data, "time_limit_s": time_limit_s}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def solve_case(seed: int, index: int, time_limit_s: float, plans_dir: Path | None = None) -> tuple[dict, Plan | None, str]:
    """Scenario ``index`` of ``seed`` at its load and its plan, or (data, None, why it was skipped).

    With ``plans_dir``, a plan solved before from the same draw and time limit is read back
    (``<plans_dir>/<name>.json``) instead of solving again; a new one is written there."""
    drawn = random_scenario(seed, index)
    path = plans_dir / f"{drawn['name']}.json" if plans_dir is not None else None
    key = _fingerprint(drawn, time_limit_s)
    if path is not None and path.is_file():
        cached = json.loads(path.read_text())
        if cached.get("fingerprint") == key:
            plan = parse_plan(cached["plan"], str(path)) if "plan" in cached else None
            data = cached["scenario"]
            if drawn["workload"].get("trace"):
                data["workload"]["trace"] = drawn["workload"]["trace"]  # this checkout's copy of the trace
            return data, plan, cached.get("skipped", "")
    data, plan, why = drawn, None, ""
    try:
        data = at_load(drawn, load_fraction(seed, index))
        plan = optimize(resolve(parse_scenario(data)), SolveConfig(marginals=False, time_limit_s=time_limit_s))
    except PlacerError as err:
        why = f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"fingerprint": key, "scenario": data}
        entry.update({"plan": json.loads(plan.to_json())} if plan is not None else {"skipped": why})
        path.write_text(json.dumps(entry, indent=1))
    return data, plan, why


def judge(problem, plan, config: SimConfig, rps: float, pools: bool = False, queues: bool = False,
          pooled: bool = True) -> dict:
    """A plan's agreement dict (:func:`placer.sim.verify.agreement`) with what the simulator measured under
    ``config``: ``pooled``, runs of seeds ``config.seed``, ``+ 1`` … pooled until their P90 settles
    (:func:`pooled_seeds.pooled_runs`; its :class:`~pooled_seeds.Spread` under ``"seeds"``); ``pools`` or
    ``queues``: one run, each decode pool's figures (:func:`agreement_pools.simulate_pools`, under ``"pools"``)
    or each P queue's (:func:`agreement_queues.simulate_queues`, under ``"queued"``), the problem and plan beside."""
    extra: dict = {}
    if pools:
        sim, per_pool = simulate_pools(problem, plan, config, rps)
        extra.update(problem=problem, plan=plan, pools=per_pool, requests=config.requests)
    elif queues:
        sim, *queued = simulate_queues(problem, plan, config)
        extra.update(problem=problem, plan=plan, queued=queued)
    elif pooled:
        sim, extra["seeds"] = pooled_runs(problem, plan, config)
    else:
        sim = simulate(problem, plan, config)
    return agreement(problem, plan, sim) | extra


def run_one(seed: int, index: int, requests: int, time_limit_s: float, plans_dir: Path | None = None,
            pools: bool = False, steady: bool = False, queues: bool = False, pooled: bool = True) -> dict:
    """One scenario: its :func:`judge` dict (plus name and seconds, and a trace's :func:`line_loads`), or
    {"skipped": reason}. ``steady``: warm up past the decode pools' fill (:func:`agreement_pools.steady_config`)."""
    start = time.perf_counter()
    data, plan, why = solve_case(seed, index, time_limit_s, plans_dir)
    if plan is None:
        return {"name": data["name"], "skipped": why}
    problem = resolve(parse_scenario(data))
    if decode_rounds.wanted(problem):  # a trace plan is priced at the hits its own routing leaves (as optimize does)
        problem = with_held_hits(problem, plan)
    config, rps = sim_config(data, requests, seed), data["workload"]["arrival_rps"]
    laws = route_laws(problem, plan)
    if steady:
        config = steady_config(config, problem, plan, rps)
        config = window_config(config, max((x["relax_s"] for x in laws.values()), default=0.0), rps)
    a = judge(problem, plan, config, rps, pools, queues, pooled)
    a["route_laws"] = laws
    runs = len(a["seeds"].p90s) if "seeds" in a else 1
    a["span_s"] = sum(x["sim_requests"] for x in a["routes"]) / runs / rps if rps > 0 else math.inf
    a["runs"] = 1 if data["workload"].get("trace") else runs  # a trace's replays read one realisation
    if data["workload"].get("trace"):
        a["lines"] = line_loads(data, problem, plan, seed)
    a.update(name=data["name"], seconds=time.perf_counter() - start, rps=rps, load=load_fraction(seed, index))
    return a


def run_random(n: int, seed: int, requests: int, time_limit_s: float, plans_dir: Path | None = None,
               only: list[int] | None = None, pools: bool = False, steady: bool = False,
               queues: bool = False, pooled: bool = True) -> list[dict]:
    """Solve (or read back from ``plans_dir``) and simulate scenarios 0..n−1 of ``seed`` (or those of
    ``only``); print each and the error distributions (with ``pools``, each decode pool's batch, planned and
    simulated, and their distribution; ``steady``: the runs warm up past the decoders' fill)."""
    t0 = time.perf_counter()
    results = []
    indices = list(only) if only else list(range(n))
    for i in indices:
        r = run_one(seed, i, requests, time_limit_s, plans_dir, pools, steady, queues, pooled)
        results.append(r)
        if "skipped" in r:
            print(f"-- {r['name']}: skipped ({r['skipped']})", flush=True)
            continue
        pipes = ",".join(sorted({x["pipeline"] for x in r["routes"]}))
        print(f"== {r['name']:22s} {r['rps']:8.2f} req/s ({r['load']:.0%}) P90 ILP {r['ilp_ttft_p90_s']:7.3f} sim {r['sim_ttft_p90_s']:7.3f} "
              f"({r['ttft_p90_error']:+7.1%})  goodput ILP {r['ilp_goodput_rps']:7.2f} sim "
              f"{r['sim_goodput_rps']:7.2f} ({r['goodput_error']:+7.1%})  [{pipes}] {r['seconds']:.0f} s"
              + (f"  {r['seeds'].seeds()}" if "seeds" in r else ""), flush=True)
        if "seeds" in r and len(r["seeds"].p90s) > 2:
            print(f"     {r['seeds'].line()}", flush=True)
        for src, dst, cap, planned, held in r.get("lines", []):
            print(f"     line {src}->{dst} ({cap:g} Gbit/s): KV {planned:.2f} Gbit/s at the classes' hit, "
                  f"{held:.2f} at what the far decoders hold", flush=True)
        if pools:
            print_pools(r["problem"], r["plan"], r["pools"])
        if "queued" in r:
            print_routes(r["problem"], r["plan"], r["routes"])
            print_queues(r["problem"], r["plan"], *r["queued"])
    solved = [r for r in results if "skipped" not in r]
    n = len(indices)
    print(f"\n{len(solved)} of {n} solved, {n - len(solved)} skipped; seed {seed}, {requests} simulated requests "
          f"a scenario, {time.perf_counter() - t0:.0f} s in all")
    print(f"{'mix TTFT P90':26s} {summary([r['ttft_p90_error'] for r in solved])}")
    unsettled = [r for r in solved if "seeds" in r and not r["seeds"].settled]
    if unsettled:  # their error is their runs' window, not the plan's (pooled_seeds.UNSETTLED_STDERR)
        settled = [r for r in solved if r not in unsettled]
        print(f"{'mix TTFT P90 (settled)':26s} {summary([r['ttft_p90_error'] for r in settled])}")
        print("unsettled: " + ", ".join(f"{r['name']} {r['ttft_p90_error']:+.1%} ± "
                                        f"{r['seeds'].stderr_s / r['seeds'].pooled_p90_s:.1%}" for r in unsettled))
    print(f"{'mix goodput':26s} {summary([r['goodput_error'] for r in solved])}")
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in solved:
        for route in r["routes"]:
            if route["sim_requests"] >= MIN_ROUTE_REQUESTS:
                groups[f"pipeline {route['pipeline']}"].append(route)
                groups["pool " + ("same-dc" if route["src"] == route["dst"] else "over-line")].append(route)
    for name, rows in sorted(groups.items()):
        print(f"{name + ' TTFT P90':26s} {summary([x['ttft_p90_error'] for x in rows])}")
        print(f"{name + ' goodput':26s} {summary([x['goodput_error'] for x in rows])}")
    if pools:
        rows = [row for r in solved for row in pool_rows(r["problem"], r["plan"], r["pools"])]
        print(f"{'decode pool batch':26s} {summary([sim / plan - 1 for _, plan, sim in rows if plan > 0])}")
    print_off_routes(solved)
    return results
