"""`placer simulate`, `placer workload fit`, `placer sweep` and `placer optimize --verify` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.specs import parse_scenario
from tests.placer.sim.conftest import small_pdd_dict
from tests.placer.sim.test_engine import CONTRACT_KEYS
from tests.placer.workload.test_trace import MOONCAKE

PLACER = [sys.executable, "-m", "placer.cli"]
runner = CliRunner()


def _files(tmp_path: Path, plan) -> tuple[Path, Path]:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_pdd_dict()))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(plan.to_json())
    return scenario, plan_path


def test_simulate_json_follows_the_contract_and_repeats_with_the_seed(tmp_path, small_plan, seed):
    scenario, plan_path = _files(tmp_path, small_plan)
    args = ["simulate", str(scenario), str(plan_path), "--requests", "2000", "--seed", str(seed), "--json"]
    r = subprocess.run([*PLACER, *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert CONTRACT_KEYS <= set(data) and data["requests"] == 2000 and data["seed"] == seed
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and json.loads(again.stdout) == data


def test_simulate_prints_readable_tables(tmp_path, small_plan):
    scenario, plan_path = _files(tmp_path, small_plan)
    r = runner.invoke(app, ["simulate", str(scenario), str(plan_path), "--requests", "1500"],
                      env={"COLUMNS": "140"})
    assert r.exit_code == 0, r.output
    for words in ("TTFT P50 / P90 / P99", "planned (ILP)", "routes", "pools", "links", "P-RLD-MD", "dc-a -> dc-b"):
        assert words in r.stdout


def test_simulate_replays_a_trace(tmp_path, small_plan):
    scenario, plan_path = _files(tmp_path, small_plan)
    r = runner.invoke(app, ["simulate", str(scenario), str(plan_path), "--trace", str(MOONCAKE),
                            "--requests", "500", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["workload"] == "trace" and data["requests"] == 500
    assert 0 < data["p_hit_rate"] < 0.6  # hits came from the trace's blocks, not from the classes


def test_simulate_bad_inputs_exit_2_with_the_field_named(tmp_path, small_plan):
    scenario, plan_path = _files(tmp_path, small_plan)
    bad_trace = tmp_path / "bad.jsonl"
    bad_trace.write_text('{"timestamp": 0, "input_length": 100, "output_length": 5, "hit_rate": 0.5}\n{"oops": 1}\n')
    cases = [
        (["simulate", str(scenario), str(tmp_path / "none.json")], "cannot read plan file"),
        (["simulate", str(scenario), str(plan_path), "--requests", "0"], "requests must be >= 1"),
        (["simulate", str(scenario), str(plan_path), "--trace", str(bad_trace)], "line 2: missing field 'timestamp'"),
        (["simulate", str(scenario), str(plan_path), "--drc-lag", "2"], "drc_lag must be in [0, 1]"),
    ]
    for args, words in cases:
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        assert words in " ".join(r.stderr.split()), (args, r.stderr)
        assert "Traceback" not in r.output


def test_workload_fit_writes_classes_a_scenario_accepts(tmp_path):
    out = tmp_path / "classes.yaml"
    r = runner.invoke(app, ["workload", "fit", str(MOONCAKE), "--out", str(out)])
    assert r.exit_code == 0, r.output
    fitted = yaml.safe_load(out.read_text())["workload"]
    assert fitted["arrival_rps"] > 0 and len(fitted["classes"]) >= 3
    scenario = parse_scenario(small_pdd_dict(workload=fitted))
    assert abs(sum(c.share for c in scenario.workload.classes) - 1.0) < 1e-6
    assert yaml.safe_load(r.stdout) == yaml.safe_load(out.read_text())


def test_sweep_without_ray_writes_a_csv_and_a_plot(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_pdd_dict()))
    out = tmp_path / "sweep"
    r = runner.invoke(app, ["sweep", str(scenario), "--vary", "hit-mean", "--values", "0.85,0.9",
                            "--out", str(out), "--requests", "1500", "--no-ray"])
    assert r.exit_code == 0, r.output
    assert (out / "sweep.csv").read_text().count("\n") == 3 and (out / "sweep.png").stat().st_size > 1000
    assert "mean prefix hit rate = 0.85" in r.stdout  # the varied quantity named, not the flag
    bad = runner.invoke(app, ["sweep", str(scenario), "--vary", "load", "--values", "x", "--out", str(out)])
    assert bad.exit_code == 2 and "--values" in bad.stderr


def test_optimize_verify_prints_each_round(tmp_path):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_pdd_dict()))
    r = runner.invoke(app, ["optimize", str(scenario), "--no-marginals", "--verify", "--verify-rounds", "2",
                            "--json"])
    assert r.exit_code == 0, r.output
    assert "verify round 0: utilisation cap 0.800" in r.stderr
    plan = json.loads(r.stdout)
    assert any(note.startswith("verified by simulation") for note in plan["notes"])


def test_simulate_replays_the_executors_runtime_and_names_a_bad_figure(tmp_path, small_plan):
    """`--runtime` replays the executor as it serves on one host: its per-request overhead and KV
    serialisation come on top of the forwards, so TTFT grows; a bad figure is exit 2 naming it."""
    scenario, plan_path = _files(tmp_path, small_plan)
    figures = {"cores": 64, "slowdown": 1.0, "request_overhead_s": 0.25, "kv_export_bytes_per_s": 5e9,
               "kv_import_bytes_per_s": 5e9, "token_stream_s": 0.0}
    runtime = tmp_path / "runtime.json"
    runtime.write_text(json.dumps(figures))
    args = ["simulate", str(scenario), str(plan_path), "--requests", "1500", "--json"]
    plain = json.loads(runner.invoke(app, args).stdout)
    r = runner.invoke(app, [*args, "--runtime", str(runtime)])
    assert r.exit_code == 0, r.output
    served = json.loads(r.stdout)
    assert served["ttft_p50_s"] >= plain["ttft_p50_s"] + 0.25  # every request pays the router's overhead
    runtime.write_text(json.dumps({**figures, "cores": -1}))
    bad = runner.invoke(app, [*args, "--runtime", str(runtime)])
    assert bad.exit_code == 2 and "runtime.cores" in bad.output and "-1" in bad.output
