"""Instance shapes on the faces a user reads: the pool tables of `placer optimize`/`evaluate`
(placer.cli.render), the report's pool table (placer.report.tables) and `placer simulate`'s JSON
and table. Two shapes of the same chips (tp8 and tp8-dep) must never look alike."""

from __future__ import annotations

import json

from rich.console import Console
from typer.testing import CliRunner

from placer.cli.app import app
from placer.cli.render import pools_table
from placer.plan import parse_plan
from placer.report.tables import pool_rows

#: DeepSeek-V3 on H200s, where the planner decodes on dep (tests/placer/breadth/test_shapes.py)
DEEPSEEK = {"name": "dsv3", "model": "deepseek-v3", "kv_dtype": "fp8", "weight_dtype": "fp8",
            "datacenters": [{"name": "dc", "inventory": {"H200-SXM": 64}}],
            "workload": {"arrival_rps": 4.0, "classes": [
                {"name": "c", "share": 1.0, "input_tokens": 8192, "output_tokens": 1024, "hit_rate": 0.75}]},
            "sla": {"ttft_p90_s": 3.0, "tpot_s": 0.05}, "options": {"tp_degrees": [8, 16]}}

TWO_SHAPES = {"scenario": "t", "pools": [
    {"role": "P", "datacenter": "a", "chip": "H200-SXM", "tp": 8, "shape": "tp", "count": 1},
    {"role": "P", "datacenter": "a", "chip": "H200-SXM", "tp": 8, "shape": "dep", "count": 1},
    {"role": "MD", "datacenter": "a", "chip": "H200-SXM", "tp": 16, "shape": "dep", "count": 1}],
    "routes": [{"request_class": "c", "pipeline": "P-MD", "src": "a", "dst": "a", "rps": 1.0}]}


def _text(renderable) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def _row_cells(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.count("│") > 2]


def test_the_pool_table_tells_two_shapes_of_the_same_chips_apart():
    rows = _row_cells(_text(pools_table(parse_plan(TWO_SHAPES))))
    p_rows = [r for r in rows if r[0] == "P"]
    assert sorted(r[3] for r in p_rows) == ["8", "8-dep"]
    assert all(r[5] == "8" for r in p_rows)  # chips stay the chip count
    assert [r[3] for r in rows if r[0] == "MD"] == ["16-dep"]


def test_the_report_pool_rows_carry_the_shape_label():
    assert sorted(r["tp"] for r in pool_rows(parse_plan(TWO_SHAPES))) == ["16-dep", "8", "8-dep"]


def test_simulation_json_and_table_carry_the_shape_only_where_the_plan_names_one(tmp_path):
    scenario, plan_path = tmp_path / "s.json", tmp_path / "plan.json"
    scenario.write_text(json.dumps(DEEPSEEK))
    runner = CliRunner()
    assert runner.invoke(app, ["optimize", str(scenario), "--json", "--out", str(plan_path)]).exit_code == 0
    plan = json.loads(plan_path.read_text())
    shaped = {(p["role"], p["datacenter"], p["chip"], p["tp"]): p["shape"] for p in plan["pools"] if p["count"]}
    assert "dep" in shaped.values()

    result = runner.invoke(app, ["simulate", str(scenario), str(plan_path), "--requests", "200", "--json"])
    assert result.exit_code == 0, result.output
    sim = json.loads(result.output[result.output.index("{"):])
    assert {(p["role"], p["datacenter"], p["chip"], p["tp"]): p["shape"] for p in sim["pools"]} == shaped
    assert all(isinstance(p["tp"], int) for p in sim["pools"])

    table = runner.invoke(app, ["simulate", str(scenario), str(plan_path), "--requests", "200"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    dep = next(k for k, v in shaped.items() if v == "dep")
    assert f"{dep[3]}-dep" in table.output

    for p in plan["pools"] + plan.get("assignments", []):  # a plan written before shapes: no key
        p.pop("shape", None)
        p.pop("pp", None)
    plan_path.write_text(json.dumps(plan))
    result = runner.invoke(app, ["simulate", str(scenario), str(plan_path), "--requests", "200", "--json"])
    assert result.exit_code == 0, result.output
    assert all("shape" not in p for p in json.loads(result.output[result.output.index("{"):])["pools"])
