"""What each side serves within the scenario's inventory, as data: the figures of the headline's
first line (:func:`placer.report.headline.inventory_line`) for the compare JSON.

in:  a :func:`placer.baselines.compare` result
out: :func:`within_inventory` — ``{"pdd": {...}, "pdd_best": {...} | None, "baselines": {name: {...}}}``
     (the ``within_inventory`` key of ``placer compare --json`` and ``POST /compare``):

* ``pdd``: PDD at the whole offered load (the result's ``pdd``): ``served_rps``, ``offered_rps``,
  ``bcr_requests_per_usd``;
* ``pdd_best``: PDD at its best BCR within the inventory, free to leave load as a baseline shown at
  partial load is (the result's ``pdd_best_within_inventory``), same keys; None when no baseline is
  shown at partial load (PDD was not solved so), ``{"error"}`` when that solve failed;
* ``baselines``: each baseline with a plan on the scenario's inventory (never a scaled twin): the same
  keys, ``max_within_inventory_rps`` (the most it carries within the SLA, when it carries less than
  the load), and PDD's BCR against it in per cent: ``pdd_bcr_change_pct`` (at the whole load) and
  ``pdd_best_bcr_change_pct`` (at its best BCR; None without ``pdd_best``).
"""

from __future__ import annotations

from placer.plan import Plan


def _figures(plan: Plan) -> dict:
    m = plan.metrics
    return {"served_rps": round(m.served_rps, 4), "offered_rps": m.offered_rps,
            "bcr_requests_per_usd": round(m.bcr_requests_per_usd, 4)}


def _change_pct(mine: Plan | None, theirs: Plan) -> float | None:
    them = theirs.metrics.bcr_requests_per_usd
    if mine is None or them <= 0:
        return None
    return round(100 * (mine.metrics.bcr_requests_per_usd / them - 1), 2)


def within_inventory(result: dict) -> dict:
    """The summary described in the module docstring."""
    pdd: Plan = result["pdd"]
    best = result.get("pdd_best_within_inventory")
    best_plan = best if isinstance(best, Plan) else None
    out: dict = {"pdd": _figures(pdd),
                 "pdd_best": _figures(best) if best_plan else ({"error": best["error"]} if best else None),
                 "baselines": {}}
    for name, plan in result["baselines"].items():
        if not isinstance(plan, Plan):
            continue
        info = getattr(plan, "baseline", None) or {}
        entry = _figures(plan)
        if isinstance(info.get("max_within_inventory_rps"), (int, float)):
            entry["max_within_inventory_rps"] = info["max_within_inventory_rps"]
        entry["pdd_bcr_change_pct"] = _change_pct(pdd, plan)
        entry["pdd_best_bcr_change_pct"] = _change_pct(best_plan, plan)
        out["baselines"][name] = entry
    return out
