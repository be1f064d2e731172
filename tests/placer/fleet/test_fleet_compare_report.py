"""Fleets through `compare` and `report` (issue 44, stumble 5): each model's summary shows the
WAN its routes cross, and both commands work per model instead of refusing a fleet."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from placer.fleet_links import split_with_links
from placer.optimize import SolveConfig, as_fleet, optimize_fleet
from placer.report.tables import busiest_line
from placer.specs import parse_scenario


@pytest.fixture
def fleet_and_plan(fleet_data):
    fleet = as_fleet(parse_scenario(fleet_data))
    return fleet, optimize_fleet(fleet, SolveConfig(marginals=False))


def test_each_models_summary_shows_the_wan_its_routes_cross(fleet_and_plan):
    fleet, plan = fleet_and_plan
    for name, part in split_with_links(plan, fleet).items():
        crossing = [r for r in part.routes if r.src != r.dst and r.rps > 0]
        assert crossing, f"{name}: the example's models both cross the line"
        assert busiest_line(part) != "none"
        own = sum(line.gbit_per_s_used for line in part.links)
        assert own == pytest.approx(plan.models[name].wan_gbit_per_s, rel=1e-3)
    total = {(l.src, l.dst): l.gbit_per_s_used for l in plan.links}
    parts = split_with_links(plan, fleet).values()
    for key, used in total.items():
        assert sum(next(l.gbit_per_s_used for l in p.links if (l.src, l.dst) == key) for p in parts) \
            == pytest.approx(used, abs=1e-4)


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "placer.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_compare_a_fleet_per_model(tmp_path, fleet_data):
    scenario = tmp_path / "fleet.yaml"
    scenario.write_text(yaml.safe_dump(fleet_data))
    r = _cli("compare", scenario, "--json", "--time-limit", "20")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    names = [m["name"] for m in fleet_data["models"]]
    assert list(body["models"]) == names and body["fleet"]["models"]
    for name in names:
        res = body["models"][name]
        assert res["pdd"]["metrics"] == body["fleet"]["models"][name]
        assert {"same-dc-pd", "agg"} <= set(res["baselines"])
    text = _cli("compare", scenario, "--time-limit", "20", "--no-break-even")
    assert text.returncode == 0, text.stderr
    assert all(f"model {n}" in text.stdout for n in names) and "fleet" in text.stdout


def test_report_of_a_fleet_plan_writes_one_report_per_model_and_an_index(tmp_path, fleet_and_plan, fleet_data):
    fleet, plan = fleet_and_plan
    plan_file, scenario = tmp_path / "plan.json", tmp_path / "fleet.yaml"
    plan_file.write_text(plan.to_json())
    scenario.write_text(yaml.safe_dump(fleet_data))
    alone = _cli("report", plan_file, "--out", tmp_path / "a")
    assert alone.returncode == 0, alone.stderr
    r = _cli("report", plan_file, "--scenario", scenario, "--out", tmp_path / "r", "--requests", "300",
             "--time-limit", "20", timeout=600)
    assert r.returncode == 0, r.stderr
    index = (tmp_path / "r" / "report.html").read_text()
    for name in fleet.names:
        assert f'href="{name}/report.html"' in index
        page = (tmp_path / "r" / name / "report.html").read_text()
        assert "Why this plan" in page and "PDD beside the PD baselines" in page
        row = re.search(rf"<a href=\"{name}/report.html\">{name}</a>.*?</tr>", index).group(0)
        assert "Gbit/s" in row, row  # its own WAN use, not "none"
