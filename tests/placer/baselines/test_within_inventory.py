"""Like with like within the inventory: where a baseline is shown at partial load (it stops at its best
BCR), PDD is solved under the same rule too and the headline's first line gives PDD both ways; the
service's deadline counts every solve compare runs (issue 45)."""

from __future__ import annotations

import re

import pytest

from placer.baselines import BEST_WITHIN_NOTE, BASELINES, carries_less, within_inventory
from placer.baselines import solve as baseline_solve
from placer.optimize import SolveConfig
from placer.plan import Metrics, Plan, PoolOut
from placer.problem import resolve
from placer.report.headline import headline
from placer.report.tables import PDD_BEST, baseline_rows
from placer.service.jobs.work import compare_deadline
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict

FAST = SolveConfig(time_limit_s=5.0, marginals=False)


@pytest.fixture(scope="module")
def counted(request):
    """compare on the micro scenario (same-dc-pd cannot carry its 6 req/s on dc-a's four H100s), with
    the solves it ran, each counted as the time limit it may take: every ``optimize`` (PDD) and every
    ``_best_variant`` (a baseline attempt: its variants share one time limit)."""
    mp = pytest.MonkeyPatch()
    units = []
    for fn in ("optimize", "_best_variant"):
        real = getattr(baseline_solve, fn)

        def counting(*args, _real=real, _fn=fn, **kwargs):
            units.append(_fn)
            return _real(*args, **kwargs)

        mp.setattr(baseline_solve, fn, counting)
    request.addfinalizer(mp.undo)
    result = baseline_solve.compare(resolve(parse_scenario(micro_dict())), FAST)
    return result, units


def test_beside_a_partial_baseline_pdd_is_also_solved_at_its_best_bcr_within_the_inventory(counted):
    result, _ = counted
    partial = [n for n, p in result["baselines"].items() if isinstance(p, Plan) and carries_less(p)]
    assert partial, "the micro scenario no longer has a baseline at partial load: pick a heavier load"
    pdd, best = result["pdd"], result["pdd_best_within_inventory"]
    assert pdd.metrics.served_rps == pytest.approx(pdd.metrics.offered_rps, rel=1e-3)  # pdd: the whole load
    assert best.notes[0] == BEST_WITHIN_NOTE
    assert best.metrics.bcr_requests_per_usd >= pdd.metrics.bcr_requests_per_usd
    first = headline(result).splitlines()[0]
    assert first.startswith(f"within the inventory: PDD serves {pdd.metrics.served_rps:.2f} / 6 req/s at BCR "
                            f"{pdd.metrics.bcr_requests_per_usd:.1f}")
    summary = within_inventory(result)
    assert summary["pdd_best"]["bcr_requests_per_usd"] == pytest.approx(best.metrics.bcr_requests_per_usd, abs=1e-3)
    for name in partial:
        entry = summary["baselines"][name]
        them = result["baselines"][name].metrics.bcr_requests_per_usd
        assert entry["pdd_best_bcr_change_pct"] == pytest.approx(
            100 * (best.metrics.bcr_requests_per_usd / them - 1), abs=0.01)
        assert entry["pdd_bcr_change_pct"] == pytest.approx(100 * (pdd.metrics.bcr_requests_per_usd / them - 1),
                                                            abs=0.01)
    assert re.search(r": PDD [+-]\d+\.\d %( at the whole load, [+-]\d+\.\d % at its best BCR)?(;|$)", first)


def test_the_service_deadline_counts_every_solve_compare_runs(counted):
    _, units = counted
    seconds, why = compare_deadline(FAST.time_limit_s, margin_s=0.0)
    assert len(units) <= seconds / FAST.time_limit_s, (units, why)
    assert why.startswith(f"{2 + 6 * len(BASELINES)} solves")


def _plan(bcr: float, served: float, baseline: dict | None = None, notes=()) -> Plan:
    extra = {"baseline": baseline} if baseline else {}
    return Plan(scenario="s", pools=[PoolOut(role="P", datacenter="dc-a", chip="Ascend-910B", tp=16, count=1)],
                notes=list(notes), metrics=Metrics(bcr_requests_per_usd=bcr, cost_usd_per_h=10,
                                                   goodput_rps=0.95 * served, served_rps=served, offered_rps=10.0,
                                                   sla_attainment=0.95), **extra)


def test_the_first_line_sets_pdd_at_its_best_bcr_beside_the_partial_baseline():
    """The flagship's shape: same-dc-pd stops at half the load where its BCR is best; at the whole load
    PDD is behind it, at its own best BCR (leaving load the same way) ahead."""
    comparison = {"pdd": _plan(187.3, 10.0), "pdd_best_within_inventory": _plan(211.2, 7.38, notes=[BEST_WITHIN_NOTE]),
                  "baselines": {"same-dc-pd": _plan(202.7, 4.96, {"max_within_inventory_rps": 5.3})}, "scaled": {}}
    first = headline(comparison).splitlines()[0]
    assert first == ("within the inventory: PDD serves 10.00 / 10 req/s at BCR 187.3, or 7.38 / 10 req/s at BCR 211.2 "
                     "at its best BCR (leaving load, as a partial baseline does); same-dc-pd serves 4.96 / 10 req/s "
                     "at BCR 202.7 (at most 5.30 req/s within the SLA, at a lower BCR): PDD -7.6 % at the whole load, "
                     "+4.2 % at its best BCR")
    rows = baseline_rows(comparison)
    assert [r["name"] for r in rows] == ["pdd", PDD_BEST, "same-dc-pd"]
    assert rows[1]["served"] == "7.38 / 10" and "its best BCR within the inventory" in rows[1]["note"]
    # PDD's best BCR is at the whole load: said once, no second figure
    comparison["pdd_best_within_inventory"] = _plan(187.3, 10.0, notes=[BEST_WITHIN_NOTE])
    first = headline(comparison).splitlines()[0]
    assert "(also its best BCR when it may leave load" in first and first.endswith(": PDD -7.6 %")
    assert [r["name"] for r in baseline_rows(comparison)] == ["pdd", "same-dc-pd"]


def test_the_partial_baseline_with_the_best_bcr_is_set_beside_pdd_at_its_best_bcr():
    """eight-dc's shape: prfaas carries the whole load at PDD's BCR, and Splitwise stops at part of it at
    a higher BCR — the one to set beside PDD at its own best BCR, though the equal-load line names prfaas."""
    comparison = {"pdd": _plan(100.0, 10.0), "pdd_best_within_inventory": _plan(104.0, 5.7, notes=[BEST_WITHIN_NOTE]),
                  "baselines": {"same-dc-pd": _plan(90.0, 4.0), "hetero-same-dc-pd": _plan(103.9, 5.7),
                                "prfaas": _plan(100.0, 10.0)}, "scaled": {}}
    first = headline(comparison).splitlines()[0]
    assert first.endswith("; hetero-same-dc-pd serves 5.70 / 10 req/s at BCR 103.9: PDD -3.8 % at the whole load, "
                          "+0.1 % at its best BCR")
    assert "prfaas serves 10.00 / 10 req/s at BCR 100.0: PDD +0.0 % at the whole load, +4.0 % at its best BCR" in first


def test_pdd_whole_load_plan_is_called_its_best_bcr_only_when_the_solve_leaving_load_proved_it():
    """eight-dc on a loaded host: the solve leaving load stopped on its time limit without beating the
    whole-load plan, while Splitwise shows a higher BCR PDD could run too: no claim it is PDD's best."""
    pdd = _plan(100.0, 10.0)
    comparison = {"pdd": pdd, "baselines": {"hetero-same-dc-pd": _plan(103.9, 5.7)}, "scaled": {}}
    for status, said in (("optimal", "(also its best BCR when it may leave load"),
                         ("feasible", "(leaving load, its solve found no higher BCR before its time limit: "
                                      "feasible, 1.4 % gap; raise --time-limit)")):
        best = pdd.model_copy(update={"best_within_inventory": {"status": status, "mip_gap": 0.014,
                                                                "whole_load_plan": True}})
        first = headline({**comparison, "pdd_best_within_inventory": best}).splitlines()[0]
        assert first.startswith(f"within the inventory: PDD serves 10.00 / 10 req/s at BCR 100.0 {said}")
