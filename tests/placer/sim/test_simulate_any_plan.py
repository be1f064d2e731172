"""`placer simulate` replays any plan: an overloaded or hand-edited one with warnings
(exit 0), a malformed one (unknown chip or datacenter) with exit 2 naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from tests.placer.sim.conftest import small_pdd_dict

PLACER = [sys.executable, "-m", "placer.cli"]


def _run(tmp_path, plan: dict, requests: int = 3000):
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_pdd_dict()))
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan))
    return subprocess.run([*PLACER, "simulate", str(scenario), str(plan_path), "--requests", str(requests),
                           "--seed", "3", "--json"], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "COLUMNS": "120"})


def _starved(small_plan) -> dict:
    """The solver's plan with every pool cut to one instance and its assignments dropped:
    a hand edit whose decode pools cannot carry the offered load."""
    plan = json.loads(small_plan.to_json())
    assert any(pool["count"] > 1 for pool in plan["pools"])
    for pool in plan["pools"]:
        pool["count"] = 1
    plan["assignments"] = []
    return plan


def test_an_overloaded_plan_replays_with_warnings_instead_of_exit_3(tmp_path, small_plan, small_problem):
    r = _run(tmp_path, _starved(small_plan))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert "cannot carry its load" in r.stderr and "replaying it as given" in r.stderr
    # the run shows how it fails: the SLA missed, and queues growing or load left unserved
    assert data["ttft_p90_s"] > small_problem.ttft_p90_s
    assert "misses the SLA" in r.stderr
    assert "grows" in r.stderr or "served" in r.stderr or "dropped" in r.stderr
    assert data["warnings"] and all(w.split()[0] for w in data["warnings"])


def test_a_plan_with_only_pools_is_routed_without_the_solver(tmp_path, small_plan):
    plan = _starved(small_plan)
    plan["routes"] = []
    r = _run(tmp_path, plan, requests=1500)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["measured_requests"] > 0 and data["routes"]


def test_unknown_chip_or_datacenter_is_still_bad_input(tmp_path, small_plan):
    for field, value in (("chip", "NoSuchChip"), ("datacenter", "dc-z")):
        plan = json.loads(small_plan.to_json())
        plan["pools"][0][field] = value
        r = _run(tmp_path, plan, requests=500)
        assert r.returncode == 2, (field, r.stderr)
        assert value in r.stderr and "Traceback" not in r.stderr
