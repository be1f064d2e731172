"""Replay any plan: routes for a plan the solver cannot route, and the signs of its overload.

in:  a Problem and a Plan whose pools cannot carry the offered load (``evaluate_plan``
     found it infeasible), or a hand-edited one
out: :func:`check_names` — InputError (exit 2) naming an unknown chip, datacenter or class;
     :func:`replayable` — the plan with routes the simulator's router can split over the
     pools (its own routes when it has some; else each class spread over the pipelines
     its pools allow, in proportion to pool sizes), no solver involved;
     :func:`overload_signs` — what the simulation measured going wrong (queues growing,
     TTFT past the SLA, requests dropped, load not served), one sentence each.

An operator replays an overloaded plan to *see* how it fails; the simulator needs only
which pipeline and pools each request takes, which the router derives from routes.
"""

from __future__ import annotations

from placer.errors import InputError
from placer.pdd import MD, P, P_D, P_MD, P_RLD, P_RLD_MD, RLD, D
from placer.plan import Plan, Route

#: A pool's queue counts as growing when its mean over the last quarter of the run is
#: at least this many times its mean over the first quarter (and above one request).
GROWTH_FACTOR = 2.0


def check_names(problem, plan: Plan) -> None:
    """InputError naming the first pool or route that refers to what the scenario lacks."""
    dcs = set(problem.dc_names)
    classes = {c.name for c in problem.classes}
    for p in plan.pools:
        if p.datacenter not in dcs:
            raise InputError(f"plan pool in unknown datacenter {p.datacenter!r}; scenario has {', '.join(sorted(dcs))}")
        if p.chip not in problem.chips:
            raise InputError(f"plan pool uses unknown chip {p.chip!r}; scenario knows {', '.join(sorted(problem.chips))}")
    for r in plan.routes:
        for field, dc in (("src", r.src), ("dst", r.dst)):
            if dc not in dcs:
                raise InputError(f"plan route {field} {dc!r} is no datacenter of the scenario")
        if r.request_class not in classes:
            raise InputError(f"plan route request_class {r.request_class!r} is no class of the scenario")


def replayable(problem, plan: Plan) -> Plan:
    """The plan with routes the simulator can follow (assignments dropped: the router splits
    each route over its source's P pools, and decodes evenly over the right pools)."""
    routes = plan.routes or _routes_from_pools(problem, plan)
    if not routes:
        raise InputError("plan: its pools offer no pipeline from a P pool to a decode pool; nothing to replay")
    return plan.model_copy(update={"routes": routes, "assignments": []})


def _routes_from_pools(problem, plan: Plan) -> list[Route]:
    """Each class's offered rate spread over (P datacenter, decode datacenter) pairs the pools
    and lines allow, in proportion to P instances × decode instances."""
    size: dict[tuple[str, str], int] = {}
    for p in plan.pools:
        if p.count > 0:
            size[(p.role, p.datacenter)] = size.get((p.role, p.datacenter), 0) + p.count
    pairs = []  # (pipeline, src, dst, weight)
    for (role, src), n_p in size.items():
        if role != P:
            continue
        for dst in problem.dc_names:
            if dst != src and (src, dst) not in problem.links:
                continue
            if size.get((D, dst)):
                pairs.append((P_D, src, dst, n_p * size[(D, dst)]))
            elif size.get((MD, dst)):
                relay = dst != src and size.get((RLD, src))
                pairs.append((P_RLD_MD if relay else P_MD, src, dst, n_p * size[(MD, dst)]))
    total = sum(w for *_, w in pairs)
    routes = []
    for c in problem.classes:
        rps = c.share * problem.arrival_rps
        if not pairs:
            continue
        routes.extend(Route(request_class=c.name, pipeline=pipe, src=s, dst=d, rps=rps * w / total)
                      for pipe, s, d, w in pairs)
    if not pairs:  # RLD only: the filter's pipeline for every class
        routes = [Route(request_class=c.name, pipeline=P_RLD, src=src, dst=src,
                        rps=c.share * problem.arrival_rps)
                  for (role, src) in size if role == RLD and size.get((P, src)) for c in problem.classes]
    return routes


def overload_signs(result, sla_ttft_s: float) -> list[str]:
    """What the simulator measured going wrong, one sentence each (empty when nothing did)."""
    data = result.data
    signs = []
    series = data.get("series", {}).get("queues", {})
    for label, values in series.items():
        q = max(1, len(values) // 4)
        first, last = sum(values[:q]) / q, sum(values[-q:]) / q
        if last >= 1.0 and last >= GROWTH_FACTOR * max(first, 0.5):
            signs.append(f"queue of pool {label} grows: {first:.1f} requests waiting in the first quarter of the "
                         f"run, {last:.1f} in the last")
    if data["ttft_p90_s"] > sla_ttft_s:
        signs.append(f"TTFT P90 {data['ttft_p90_s']:.3f} s (P99 {data['ttft_p99_s']:.3f} s) misses the SLA "
                     f"{sla_ttft_s:g} s; SLA attainment {100 * data['sla_attainment']:.1f} %")
    if data.get("rejected_requests"):
        signs.append(f"{data['rejected_requests']} of {data['requests']} requests dropped (no pool could take them)")
    offered, served = data.get("offered_rps", 0.0), data.get("served_rps", 0.0)
    if offered > 0 and served < 0.95 * offered:
        signs.append(f"served {served:.3f} of {offered:.3f} req/s offered")
    return signs
