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
     left out of the per-route rows (their P90 is noise). Then each route row beyond 10 % (:func:`print_off_routes`):
     its classes and P pools, its error beside its P90's standard error (``noise``) and one run's span beside the
     relaxation time of its P queues and line (``window``: the run read their transient from empty).
     A drawn run is lengthened to warm up over that relaxation and measure two (:func:`window_config`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import statistics
import time
from collections import defaultdict
from pathlib import Path

from agreement_pools import pool_rows, print_pools, simulate_pools, steady_config  # siblings under bench/
from agreement_queues import print_queues, print_routes, simulate_queues
from random_scenarios import load_fraction, random_scenario
from pooled_seeds import pooled_runs
from placer import decode_rounds
from placer.errors import InfeasiblePlanError, PlacerError
from placer.evaluate import analyze
from placer.flows import Route, instance
from placer.queue_laws import p_instance_laws
from placer.optimize import SolveConfig, optimize
from placer.p_queues import mixture_cdf, mixture_quantile
from placer.plan import Plan, parse_plan
from placer.problem import resolve
from placer.sim import SimConfig, simulate
from placer.sim.verify import agreement
from placer.specs import parse_scenario
from placer.pdd import P_D, P_MD
from placer.workload.decode_hits import destination_shares, routed_decode_hits, with_held_hits
from placer.workload.fit import trace_arrival_rps
from placer.workload.trace import read_trace

MIN_ROUTE_REQUESTS = 200

#: Route rows whose |TTFT P90 error| passes this are listed after the summary (:func:`print_off_routes`).
LISTED_ERROR = 0.10
#: A listed row names its busiest classes × P pools, at most this many.
LISTED_FLOWS = 4
#: A listed row whose |error| is under this many standard errors of its simulated P90 is marked noise.
NOISE_SES = 2.0
#: The quantile the route rows compare, and the relative step of the law's density read around it.
P90, DENSITY_STEP = 0.90, 0.02


#: A listed row is marked ``window`` where one run measures less than this many relaxation times of the
#: slowest of its P queues and its line (:func:`relaxation_s`): the run reads a transient from empty, not the
#: steady state the law prices.
WINDOW_RELAXATIONS = 1.0


#: A drawn run is lengthened to warm up over one relaxation time of its slowest route's P queues and line and
#: measure this many more (:func:`window_config`), up to :data:`MAX_WINDOW_REQUESTS` requests a run.
MEASURED_QUEUE_RELAXATIONS = 2.0
MAX_WINDOW_REQUESTS = 200_000


def window_config(config: SimConfig, relax_s: float, rps: float) -> SimConfig:
    """``config`` warmed up over ``relax_s`` (the slowest :func:`relaxation_s` of the plan's routes) and measuring
    :data:`MEASURED_QUEUE_RELAXATIONS` of it at least — a run from empty shorter than that reads the P queues'
    and lines' transient, not the steady state the law prices (rnd-7-0-mixed's dc3→dc2 line: a rare 19-s
    transfer under a stream of 0.04-s ones, relaxation 373 s; its 254-s runs read the small transfers' mean excess
    0.149 s where the law says 0.231; 1M requests read 0.208) — at most :data:`MAX_WINDOW_REQUESTS` a run (or the
    run's own length; past it the warm-up gives way first). A trace replays its own length: unchanged."""
    if config.workload == "trace" or not 0.0 < relax_s < math.inf or rps <= 0:
        return config
    warm = config.warmup_fraction * config.requests
    measured = config.requests - warm
    want_warm, want_measured = relax_s * rps, MEASURED_QUEUE_RELAXATIONS * relax_s * rps
    if warm >= want_warm and measured >= want_measured:
        return config
    cap = max(MAX_WINDOW_REQUESTS, config.requests)
    measured = min(max(measured, want_measured), cap)
    warm = min(max(warm, want_warm), cap - measured)
    total = max(int(warm + measured), config.requests)
    return dataclasses.replace(config, requests=total, warmup_fraction=min(warm / total, 0.9))


def relaxation_s(rho: float, rate_second_s2: float) -> float:
    """How long a work-conserving queue takes to forget where it started: 2·λE[S²]/(1 − ρ)², the relaxation
    time of its work's reflected Brownian motion (drift −(1 − ρ), variance λE[S²] a second; Abate and Whitt,
    *Transient behavior of regulated Brownian motion*, 1987) — 4·E[W]/(1 − ρ) for an M/G/1 queue, and the same
    for a processor-sharing line, whose work is a FCFS queue's. ∞ at or past saturation."""
    return 2.0 * rate_second_s2 / (1.0 - rho) ** 2 if rho < 1.0 else math.inf


def _queue_relaxations(problem, plan) -> dict:
    """Per P pool (its key), the slowest :func:`relaxation_s` of its instances' queues
    (:func:`placer.queue_laws.p_instance_laws`)."""
    counts = {p.key: p.count for p in plan.pools if p.count > 0}
    laws = p_instance_laws(problem, plan, counts, {k: instance(problem, k.chip, k.tp) for k in counts})
    out: dict = defaultdict(float)
    for key, parts in laws.items():
        for part in parts:
            law = part.law
            lam = law.rho / law.mean_s if law.mean_s > 0 else 0.0
            out[tuple(key[:4])] = max(out[tuple(key[:4])], relaxation_s(law.rho, lam * law.second_moment_s2))
    return out


def _line_relaxations(problem, plan) -> dict[tuple[str, str], float]:
    """Per line (src, dst), :func:`relaxation_s` of the KV transfers the plan's routes send over it (each
    route's bytes at the line's full rate, :meth:`placer.flows.Route.wan_bytes`)."""
    classes = {c.name: c for c in problem.classes}
    load: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in plan.routes:
        link = problem.links.get((r.src, r.dst))
        if r.src == r.dst or r.rps <= 0 or link is None or link.bytes_per_s <= 0:
            continue
        size_s = Route(problem, classes[r.request_class], r.pipeline, r.src, r.dst, problem.options.drc).wan_bytes() \
            / link.bytes_per_s
        load[(r.src, r.dst)][0] += r.rps * size_s
        load[(r.src, r.dst)][1] += r.rps * size_s * size_s
    return {line: relaxation_s(rho, m2) for line, (rho, m2) in load.items()}


def route_laws(problem, plan) -> dict[tuple[str, str, str], dict]:
    """Per route row of :func:`placer.sim.verify.agreement` ((pipeline, P pool's dc, dst)): its classes and P
    pools with their req/s (``"flows"``: (class, "chip tpN", req/s)) and ``"se_sqrt_n"``, the relative standard
    error of a P90 read over n requests drawn from the plan's law, times √n: √(0.9·0.1) ÷ (f(q)·q) with q the
    law's P90 and f its density there (central difference over ±:data:`DENSITY_STEP`·q) — the order
    statistic's spread if the law were right and the requests independent (queueing correlates neighbours,
    so the true spread is wider: a row under :data:`NOISE_SES` of it is noise for certain, not conversely), and
    ``"relax_s"``, the slowest :func:`relaxation_s` of its P pools' queues and, where its first token waits for
    the KV to cross (P-MD, P-D), its line."""
    groups: dict[tuple, list] = defaultdict(list)
    for f in analyze(problem, plan).flows:
        groups[(f.pipeline, f.p_pool[1], f.dst)].append(f)
    queues, lines = _queue_relaxations(problem, plan), _line_relaxations(problem, plan)
    out = {}
    for key, flows in groups.items():
        total = sum(f.rps for f in flows)
        if total <= 0:
            continue
        q = mixture_quantile(flows, P90)
        lo, hi = q * (1 - DENSITY_STEP), q * (1 + DENSITY_STEP)
        density = (mixture_cdf(flows, hi) - mixture_cdf(flows, lo)) / (hi - lo)
        se = math.sqrt(P90 * (1 - P90)) / (density * q) if density > 0 and q > 0 else math.inf
        shares: dict[tuple[str, str], float] = defaultdict(float)
        for f in flows:
            shares[(f.request_class, f"{f.p_pool[2]} tp{f.p_pool[3]}")] += f.rps
        line = lines.get((key[1], key[2]), 0.0) if key[0] in (P_MD, P_D) else 0.0  # the first token waits for it
        relax = max([queues.get(tuple(f.p_pool), 0.0) for f in flows] + [line])
        out[key] = {"flows": [(c, pool, rps) for (c, pool), rps in sorted(shares.items())], "se_sqrt_n": se,
                    "relax_s": relax}
    return out


def off_routes(solved: list[dict], limit: float = LISTED_ERROR) -> list[tuple[dict, dict]]:
    """(scenario, route row) of each route with at least :data:`MIN_ROUTE_REQUESTS` simulated requests whose
    |TTFT P90 error| passes ``limit``, the largest first; each row gets ``"se"``, the relative standard error
    of its simulated P90 (:func:`route_laws`' ``se_sqrt_n`` ÷ √requests), ``"noise"``, |error| under
    :data:`NOISE_SES` of it, and ``"window"``, one run's measured span (the scenario's ``"span_s"``) under
    :data:`WINDOW_RELAXATIONS` of the route's ``relax_s``."""
    rows = []
    for r in solved:
        for route in r["routes"]:
            e = route["ttft_p90_error"]
            if route["sim_requests"] < MIN_ROUTE_REQUESTS or not math.isfinite(e) or abs(e) <= limit:
                continue
            law = r.get("route_laws", {}).get((route["pipeline"], route["src"], route["dst"]), {})
            se = law.get("se_sqrt_n", math.inf) / math.sqrt(route["sim_requests"])
            window = r.get("span_s", math.inf) < WINDOW_RELAXATIONS * law.get("relax_s", 0.0)
            rows.append((r, route | {"se": se, "noise": abs(e) < NOISE_SES * se, "window": window,
                                     "relax_s": law.get("relax_s", 0.0), "flows": law.get("flows", [])}))
    return sorted(rows, key=lambda x: -abs(x[1]["ttft_p90_error"]))


def print_off_routes(solved: list[dict], limit: float = LISTED_ERROR) -> None:
    """One line a route row beyond ``limit`` (:func:`off_routes`): scenario, pipeline, src → dst, simulated
    requests, ILP vs simulated P90, error ± its standard error (``noise`` under :data:`NOISE_SES` of it), then
    its busiest classes with their P pools and req/s."""
    rows = off_routes(solved, limit)
    far = [x for _, x in rows if abs(x["ttft_p90_error"]) > 0.25]
    print(f"\nroute rows beyond {limit:.0%} TTFT P90 error ({len(rows)}; beyond 25 %: {len(far)}, of which noise "
          f"{sum(x['noise'] for x in far)}, window {sum(x['window'] and not x['noise'] for x in far)}) — noise: "
          f"|error| < {NOISE_SES:g} SE of a P90 over that many requests from the law; window: a run measures less "
          f"than {WINDOW_RELAXATIONS:g} relaxation time of the route's P queues or line")
    for r, x in rows:
        flows = sorted(x["flows"], key=lambda f: -f[2])
        classes = ", ".join(f"{c}@{pool} {rps:.3g}/s" for c, pool, rps in flows[:LISTED_FLOWS])
        classes += f", +{len(flows) - LISTED_FLOWS} more" if len(flows) > LISTED_FLOWS else ""
        print(f"  {r['name']:22s} {x['pipeline']:8s} {x['src']}->{x['dst']:5s} n={x['sim_requests']:6d}  P90 ILP "
              f"{x['ilp_ttft_p90_s']:7.3f} sim {x['sim_ttft_p90_s']:7.3f} ({x['ttft_p90_error']:+6.1%} "
              f"± {x['se']:4.1%}){' noise' if x['noise'] else ''}{' window' if x['window'] else ''}  "
              f"relax {x['relax_s']:.3g} s of {r.get('span_s', math.nan):.3g} s a run  [{classes}]")


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
