"""``bench_agreement.py --random``'s route rows judged (issue 42): which are noise, which read a window, and how long
a drawn run must be to read its routes' steady state.

in:  a scenario's problem and plan (:func:`route_laws`: per route row (pipeline, P pool's datacenter, destination), its
     classes × P pools, the relative standard error × √n of a P90 read from the plan's law, and the relaxation time of its
     P queues and first-token line, :func:`relaxation_s`); the solved rows of :func:`agreement_stats.run_random`
out: :func:`window_config` (a drawn run lengthened to warm up over its routes' relaxation and measure two more);
     :func:`print_off_routes` (each route row beyond 10 %, marked ``noise`` or ``window``). Split from
     ``agreement_stats.py`` (the bench's driver), which calls these.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

from placer.evaluate import analyze
from placer.flows import Route, instance
from placer.load_drift import relaxation_s
from placer.p_queues import mixture_cdf, mixture_quantile
from placer.pdd import P_D, P_MD
from placer.queue_laws import p_instance_laws
from placer.sim import SimConfig

#: Routes with fewer simulated requests are left out of the per-route rows (their P90 is noise).
MIN_ROUTE_REQUESTS = 200

#: Route rows whose |TTFT P90 error| passes this are listed after the summary (:func:`print_off_routes`).
LISTED_ERROR = 0.10
#: A listed row names its busiest classes × P pools, at most this many.
LISTED_FLOWS = 4
#: A listed row whose |error| is under this many standard errors of its simulated P90 is marked noise.
NOISE_SES = 2.0
#: The quantile the route rows compare, and the relative step of the law's density read around it.
P90, DENSITY_STEP = 0.90, 0.02


#: Independent P90 reads a queue gives per relaxation time: the indicator of a wait above its P90 on reflected
#: Brownian motion (the queue's heavy-traffic work, drift −(1 − ρ), variance λE[S²] a second) has an integrated
#: autocorrelation of 0.4 relaxation times (numerically, 2·10⁶ steps), so a run of T seconds reads T ÷ (0.8 ×
#: relaxation) of them. Checked on simulated P queues' P90 spread over 12-16 seeds: an M/D/1 at ρ 0.7 and 0.8
#: (1.16 and 1.38 a relaxation) and rnd-7-25's MI325X tp8-dep instance at ρ 0.76 (1.4).
INDEPENDENT_PER_RELAXATION = 1.25


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
    counts = {tuple(p.key): p.count for p in plan.pools}
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
        slowest_queue = max(queues.get(tuple(f.p_pool), 0.0) for f in flows)
        # the P instances wander apart; where the line is slower it is the one queue that sets the spread
        wanderers = sum(counts.get(p, 0) for p in {tuple(f.p_pool) for f in flows}) if slowest_queue >= line else 1
        out[key] = {"flows": [(c, pool, rps) for (c, pool), rps in sorted(shares.items())], "se_sqrt_n": se,
                    "relax_s": max(slowest_queue, line), "instances": wanderers}
    return out


def effective_requests(requests: int, runs: int, span_s: float, relax_s: float, instances: int) -> float:
    """How many independent requests a route's simulated P90 reads: a queue's waits are correlated over its
    relaxation time (:func:`relaxation_s`), so each of the route's P instances gives
    :data:`INDEPENDENT_PER_RELAXATION` a relaxation per run — ``runs`` × ``instances`` × that × ``span_s`` ÷
    ``relax_s`` — never more than the requests themselves (all of them where nothing relaxes)."""
    if relax_s <= 0 or not math.isfinite(span_s) or instances <= 0:
        return float(requests)
    if not math.isfinite(relax_s):
        return 1.0
    return float(min(requests, max(runs, 1) * instances * INDEPENDENT_PER_RELAXATION * span_s / relax_s))


def off_routes(solved: list[dict], limit: float = LISTED_ERROR) -> list[tuple[dict, dict]]:
    """(scenario, route row) of each route with at least :data:`MIN_ROUTE_REQUESTS` simulated requests whose
    |TTFT P90 error| passes ``limit``, the largest first; each row gets ``"se"``, the relative standard error
    of its simulated P90 (:func:`route_laws`' ``se_sqrt_n`` ÷ √ the :func:`effective_requests` it reads), ``"noise"``, |error| under
    :data:`NOISE_SES` of it, and ``"window"``, one run's measured span (the scenario's ``"span_s"``) under
    :data:`WINDOW_RELAXATIONS` of the route's ``relax_s``."""
    rows = []
    for r in solved:
        for route in r["routes"]:
            e = route["ttft_p90_error"]
            if route["sim_requests"] < MIN_ROUTE_REQUESTS or not math.isfinite(e) or abs(e) <= limit:
                continue
            law = r.get("route_laws", {}).get((route["pipeline"], route["src"], route["dst"]), {})
            n_eff = effective_requests(route["sim_requests"], r.get("runs", 1), r.get("span_s", math.inf),
                                       law.get("relax_s", 0.0), law.get("instances", 0))
            se = law.get("se_sqrt_n", math.inf) / math.sqrt(max(n_eff, 1.0))
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
          f"|error| < {NOISE_SES:g} SE of a P90 from the law over the requests a run's queues make independent (one an "
          f"instance a relaxation time); window: a run measures less "
          f"than {WINDOW_RELAXATIONS:g} relaxation time of the route's P queues or line")
    for r, x in rows:
        flows = sorted(x["flows"], key=lambda f: -f[2])
        classes = ", ".join(f"{c}@{pool} {rps:.3g}/s" for c, pool, rps in flows[:LISTED_FLOWS])
        classes += f", +{len(flows) - LISTED_FLOWS} more" if len(flows) > LISTED_FLOWS else ""
        print(f"  {r['name']:22s} {x['pipeline']:8s} {x['src']}->{x['dst']:5s} n={x['sim_requests']:6d}  P90 ILP "
              f"{x['ilp_ttft_p90_s']:7.3f} sim {x['sim_ttft_p90_s']:7.3f} ({x['ttft_p90_error']:+6.1%} "
              f"± {x['se']:4.1%}){' noise' if x['noise'] else ''}{' window' if x['window'] else ''}  "
              f"relax {x['relax_s']:.3g} s of {r.get('span_s', math.nan):.3g} s a run  [{classes}]")
