"""`placer deploy --dry-run` of an aggregated plan that `placer optimize` made: the A instances are
placed (it used to fail with "unknown role 'A'" / "no P pool")."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from tests.placer.breadth.test_aggregated import _one_class


def test_dry_run_of_an_optimized_aggregated_plan_shows_its_a_instances(tmp_path):
    from placer.cli.app import app  # the real `placer` command; deploy plugs in by entry point

    # short prompts, a loose TTFT: the optimum is all aggregated (argued in test_aggregated.py)
    scenario = tmp_path / "agg.yaml"
    scenario.write_text(yaml.safe_dump(_one_class(1024, 256, ttft_s=5.0, tpot_s=0.05, rps=5.0)))
    plan_path = tmp_path / "plan.json"
    solved = CliRunner().invoke(app, ["optimize", str(scenario), "--json", "--out", str(plan_path)])
    assert solved.exit_code == 0, solved.output
    plan = json.loads(plan_path.read_text())
    a_pools = [p for p in plan["pools"] if p["role"] == "A" and p["count"] > 0]
    assert a_pools, "the scenario's optimum is expected to hold aggregated pools"

    result = CliRunner().invoke(app, ["deploy", str(plan_path), "--dry-run", "--scenario", str(scenario)])
    assert result.exit_code == 0, result.output
    out = result.output
    for pool in a_pools:
        for k in range(pool["count"]):
            name = f"a-{pool['datacenter']}-{pool['chip']}-tp{pool['tp']}-{k}"
            row = next(line for line in out.splitlines() if line.startswith(name))
            assert row.split()[1] == "A" and f"chip:{pool['chip']}={pool['tp']}" in row
    assert f"{sum(p['count'] for p in plan['pools'])} instances" in out
    assert "pipelines ['A']" in out and "router in dc" in out
    # only the rules A uses: its share and prefill chunk, no P-MD threshold, filter or handoff
    routing = next(line for line in out.splitlines() if line.startswith("router in"))
    assert "A: " in routing and "prefill chunk" in routing
    assert "P-MD at hit" not in out and "filter:" not in out and "handoff" not in out
