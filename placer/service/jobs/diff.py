"""Difference of two plans: pool count changes, route changes, metric deltas.

in:  two :class:`~placer.plan.Plan` (``a`` the old, ``b`` the new)
out: a JSON-ready dict (``GET /plans/{a}/diff/{b}``, stored with every replanning run)
"""

from __future__ import annotations

from typing import Any

from placer.plan import Plan

RPS_EPS = 1e-6
CONTRACT_METRICS = ("bcr_requests_per_usd", "cost_usd_per_h", "goodput_rps", "ttft_p50_s", "ttft_p90_s",
                    "ttft_p99_s", "tpot_s", "wan_gbit_per_s", "rld_token_share")


def _pools(plan: Plan) -> dict[tuple[str, str, str, int], int]:
    out: dict[tuple[str, str, str, int], int] = {}
    for p in plan.pools:
        key = p.key
        out[key] = out.get(key, 0) + p.count
    return {k: v for k, v in out.items() if v > 0}


def _routes(plan: Plan) -> dict[tuple[str, str, str, str], float]:
    out: dict[tuple[str, str, str, str], float] = {}
    for r in plan.routes:
        key = (r.request_class, r.pipeline, r.src, r.dst)
        out[key] = out.get(key, 0.0) + r.rps
    return out


def _change(before: float, after: float) -> str:
    return "added" if before == 0 else "removed" if after == 0 else "changed"


def plan_diff(a: Plan, b: Plan) -> dict[str, Any]:
    """What changes from plan ``a`` to plan ``b``."""
    pa, pb = _pools(a), _pools(b)
    pools = []
    for key in sorted(set(pa) | set(pb)):
        before, after = pa.get(key, 0), pb.get(key, 0)
        if before != after:
            role, dc, chip, tp = key
            pools.append({"role": role, "datacenter": dc, "chip": chip, "tp": tp, "count_from": before,
                          "count_to": after, "delta": after - before, "change": _change(before, after)})
    ra, rb = _routes(a), _routes(b)
    routes = []
    for key in sorted(set(ra) | set(rb)):
        before, after = ra.get(key, 0.0), rb.get(key, 0.0)
        if abs(after - before) > RPS_EPS:
            cls, pipeline, src, dst = key
            routes.append({"request_class": cls, "pipeline": pipeline, "src": src, "dst": dst,
                           "rps_from": before, "rps_to": after, "delta": after - before,
                           "change": _change(before, after)})
    metrics = {}
    for name in CONTRACT_METRICS:
        before, after = float(getattr(a.metrics, name)), float(getattr(b.metrics, name))
        metrics[name] = {"from": before, "to": after, "delta": after - before,
                         "delta_pct": (100.0 * (after - before) / abs(before)) if before else None}
    chips = {"from": sum(k[3] * n for k, n in pa.items()), "to": sum(k[3] * n for k, n in pb.items())}
    return {
        "pools": pools,
        "routes": routes,
        "metrics": metrics,
        "pool_changes": len(pools),
        "instances_added": sum(p["delta"] for p in pools if p["delta"] > 0),
        "instances_removed": -sum(p["delta"] for p in pools if p["delta"] < 0),
        "chips": {**chips, "delta": chips["to"] - chips["from"]},
    }

