"""Scenario variants of `placer sweep`, and the sweep itself (in-process; on Ray with -m ray)."""

from __future__ import annotations

import csv

import pytest

from placer.errors import InputError
from placer.problem import resolve
from placer.sim.sweep import parse_values, run_sweep, variant, write_outputs
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict


@pytest.fixture
def scenario():
    return parse_scenario(small_pdd_dict())


@pytest.mark.parametrize("target", [0.3, 0.8, 0.95])
def test_hit_mean_variant_reaches_the_target_mean_keeping_the_order(scenario, target):
    classes = variant(scenario, "hit-mean", target).workload.classes
    assert sum(c.share * c.hit_rate for c in classes) == pytest.approx(target, abs=1e-5)
    hits = [c.hit_rate for c in classes]
    before = [c.hit_rate for c in scenario.workload.classes]
    for i in range(4):
        for j in range(4):
            if before[i] < before[j]:
                assert hits[i] <= hits[j]  # a class never overtakes another


def test_other_variants_change_one_thing(scenario):
    assert all(l.gbit_per_s == 40 for l in variant(scenario, "link-gbit", 40).links)
    assert variant(scenario, "load", 3.5).workload.arrival_rps == 3.5
    priced = resolve(variant(scenario, "price", 0.9, chip="H20"))
    assert priced.chips["H20"].price_usd_per_h == 0.9
    assert resolve(scenario).chips["H100-SXM"] == priced.chips["H100-SXM"]
    with pytest.raises(InputError, match="hit-mean values must be in"):
        variant(scenario, "hit-mean", 1.5)
    with pytest.raises(InputError, match="unknown 'speed'"):
        variant(scenario, "speed", 1.0)


def test_values_parse_as_lists_or_ranges():
    assert parse_values("0.5, 0.7,0.9") == [0.5, 0.7, 0.9]
    assert parse_values("1:2:5") == pytest.approx([1.0, 1.25, 1.5, 1.75, 2.0])
    with pytest.raises(InputError, match="--values"):
        parse_values("a,b")


def test_sweep_rows_and_files(scenario, tmp_path, seed):
    rows = run_sweep(scenario, "load", [12.0, 24.0], requests=2_000, seed=seed, use_ray=False)
    assert [r["value"] for r in rows] == [12.0, 24.0] and all(r["status"] == "ok" for r in rows)
    assert rows[1]["cost_usd_per_h"] > rows[0]["cost_usd_per_h"]  # twice the load needs more hardware
    csv_path, png_path = write_outputs(rows, tmp_path / "out", "load")
    with csv_path.open() as fh:
        read = list(csv.DictReader(fh))
    assert [float(r["value"]) for r in read] == [12.0, 24.0]
    assert float(read[0]["sim_bcr_requests_per_usd"]) > 0
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_variant_without_a_plan_is_a_row_not_a_crash(scenario, seed):
    rows = run_sweep(scenario, "load", [24.0, 5000.0], requests=1_000, seed=seed, use_ray=False)
    assert rows[0]["status"] == "ok" and rows[1]["status"] == "no plan" and "infeasible" in rows[1]["error"]


@pytest.mark.ray
def test_sweep_runs_its_variants_as_ray_tasks(scenario, seed):
    local = run_sweep(scenario, "link-gbit", [10.0, 25.0], requests=2_000, seed=seed, use_ray=False)
    on_ray = run_sweep(scenario, "link-gbit", [10.0, 25.0], requests=2_000, seed=seed, use_ray=True)
    assert [r["sim_bcr_requests_per_usd"] for r in on_ray] == [r["sim_bcr_requests_per_usd"] for r in local]
