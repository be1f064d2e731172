"""`placer simulate --replan-every` on a small day: P99, the measured start-up's provenance, an inventory change."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from placer.cli import app

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = str(ROOT / "examples" / "bench-cpu.yaml")
PLAN = str(ROOT / "tests" / "placer" / "replan" / "data" / "bench-cpu-plan.json")
MEASURED = str(ROOT / "bench" / "data" / "startup_cpu.json")


def test_a_day_prints_p99_the_executors_measured_start_up_and_an_inventory_cut():
    res = CliRunner().invoke(app, ["simulate", SCENARIO, PLAN, "--replan-every", "6h", "--requests-per-window", "100",
                                   "--startup-measured", MEASURED, "--inventory-change", "dc-b:L40S:1@12", "--json"])
    assert res.exit_code == 0, res.output
    day = json.loads(res.output[res.output.index("{"):])
    assert day["startup"]["measured"]["source"] == "bench/bench_startup.py"
    assert day["startup"]["warmup_s"] == json.loads(Path(MEASURED).read_text())["warmup_s"]
    assert all("ttft_p99_s" in f for f in day["fleets"].values())
    assert day["fleets"]["static"]["chips_lost"] >= 1


def test_a_malformed_inventory_change_is_exit_2_naming_the_option():
    res = CliRunner().invoke(app, ["simulate", SCENARIO, PLAN, "--replan-every", "6h", "--inventory-change", "dc-b@12"])
    assert res.exit_code == 2 and "--inventory-change" in res.output
