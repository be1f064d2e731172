"""`placer deploy --dry-run` of an aggregated plan that `placer optimize` made: the A instances are
placed (it used to fail with "unknown role 'A'" / "no P pool")."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
#: Mélange-like: Llama-2-7B with `options.aggregated: true`; its optimum is all aggregated.
SCENARIO = ROOT / "tests" / "placer" / "breadth" / "peers" / "melange-llama2-7b.yaml"


def test_dry_run_of_an_optimized_aggregated_plan_shows_its_a_instances(tmp_path):
    from placer.cli.app import app  # the real `placer` command; deploy plugs in by entry point

    plan_path = tmp_path / "plan.json"
    solved = CliRunner().invoke(app, ["optimize", str(SCENARIO), "--json", "--out", str(plan_path)])
    assert solved.exit_code == 0, solved.output
    plan = json.loads(plan_path.read_text())
    a_pools = [p for p in plan["pools"] if p["role"] == "A" and p["count"] > 0]
    assert a_pools, "the scenario's optimum is expected to hold aggregated pools"

    result = CliRunner().invoke(app, ["deploy", str(plan_path), "--dry-run", "--scenario", str(SCENARIO)])
    assert result.exit_code == 0, result.output
    out = result.output
    for pool in a_pools:
        for k in range(pool["count"]):
            name = f"a-{pool['datacenter']}-{pool['chip']}-tp{pool['tp']}-{k}"
            row = next(line for line in out.splitlines() if line.startswith(name))
            assert row.split()[1] == "A" and f"chip:{pool['chip']}={pool['tp']}" in row
    assert f"{sum(p['count'] for p in plan['pools'])} instances" in out
    assert "pipelines ['A']" in out and "router in dc" in out
