"""`placer sweep`'s CSV and figure: the plan of each variant, what was varied, failures drawn."""

from __future__ import annotations

import csv
import math

from placer.sim.sweep import mark_changes, run_sweep, sweep_figure, write_outputs
from placer.report import charts
from placer.specs import parse_scenario
from tests.placer.report.conftest import bathtub_rows
from tests.placer.service.dashboard.support import MICRO


def test_a_price_sweep_names_the_chip_and_records_each_variant_plan(tmp_path):
    scenario = parse_scenario(MICRO)
    rows = run_sweep(scenario, "price", [0.5, 4.0, 40.0], requests=300, use_ray=False, chip="L40S", time_limit_s=20)
    path, png = write_outputs(rows, tmp_path, "price")
    read = list(csv.DictReader(path.open()))
    assert {"pools", "chips", "plan_changed", "varied"} <= set(read[0])
    assert all(r["varied"] == "price of L40S (USD per chip-hour)" for r in read)
    for r in read:
        if r["status"] == "ok":
            assert r["pools"].count(" tp") >= 2 and int(float(r["chips"])) > 0
    uses_l40s = [("L40S" in r["pools"]) for r in read if r["status"] == "ok"]
    if len(set(uses_l40s)) > 1:  # the plan dropped the chip as it got dearer: the change is marked
        assert any(r["plan_changed"] == "1" for r in read)
    assert png.stat().st_size > 10_000


def test_variants_without_a_plan_are_drawn_and_plan_changes_marked():
    rows = mark_changes([{**r, "pools": "P a X tp1 x1" if r["value"] < 0.8 else "P a X tp1 x2"}
                         for r in bathtub_rows()])
    assert [r["plan_changed"] for r in rows if r["status"] == "ok"] == [0, 0, 0, 1, 0, 0, 0]
    fig = sweep_figure(rows, "hit-mean")
    top = fig.axes[0]
    assert "no plan" in [t.get_text() for t in top.get_legend().get_texts()]
    failed = [r["value"] for r in rows if r["status"] != "ok"]
    drawn = [list(line.get_xdata()) for line in top.get_lines() if line.get_marker() == "x"]
    assert drawn == [failed]
    assert [line.get_xdata()[0] for line in top.get_lines() if line.get_linestyle() == ":"
            and len(line.get_xdata()) == 2] == [0.8]
    lo, hi = fig.axes[-1].get_xlim()
    assert 0.0 <= lo and hi <= 1.0  # a hit rate never runs past 1
    bath = charts.bathtub(rows)
    lo, hi = bath.axes[0].get_xlim()
    assert 0.0 <= lo and hi <= 100.0
    assert not math.isnan(hi)
