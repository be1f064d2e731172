"""`placer optimize` never misses its SLA silently and verifies by default (issue 42 part 3)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from placer.cli import app
from tests.placer.conftest import micro_dict

ROOT = Path(__file__).resolve().parents[3]
README_PROBLEM = ROOT / "tests" / "data" / "scenarios" / "aiconfigurator-readme-sla-miss.yaml"
#: AIConfigurator's README problem with its TTFT SLA at 0.28 s. At the README's own 0.3 s the plan
#: now meets it (planned P90 0.300 s, issue 42's length-by-length TTFT and packed P-queue law); a
#: few per cent tighter, the MILP's chord over its utilisation tiers still promises a P90 the
#: exact law puts above the SLA (0.283 s against 0.28): the miss this face must say first.
MISS_SLA_S = 0.28
VERIFIED_KEYS = {"ttft_p90_s", "ttft_p99_s", "sla_attainment", "goodput_rps", "requests"}


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def micro(tmp_path: Path) -> Path:
    path = tmp_path / "micro.yaml"
    path.write_text(yaml.safe_dump(micro_dict()))
    return path


def misses(tmp_path: Path) -> Path:
    data = yaml.safe_load(README_PROBLEM.read_text())
    data["sla"]["ttft_p90_s"] = MISS_SLA_S
    path = tmp_path / "sla-miss.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_plan_that_misses_the_sla_says_so_first_and_exits_3(tmp_path):
    r = invoke("optimize", misses(tmp_path), "--no-marginals", "--no-verify")
    assert r.exit_code == 3, r.output
    first = r.stdout.splitlines()[0]
    assert first.startswith("SLA MISSED") and "TTFT P90" in first and "0.28 s" in first
    assert "binding: sla[ttft_p90]" in r.stderr and "--best-effort" in r.stderr
    assert "Traceback" not in r.output


def test_the_json_says_which_classes_miss_and_best_effort_exits_0(tmp_path):
    scenario = misses(tmp_path)
    strict = invoke("optimize", scenario, "--no-marginals", "--no-verify", "--json")
    assert strict.exit_code == 3
    plan = json.loads(strict.stdout)  # stdout stays the plan JSON; the warning line goes to stderr
    assert plan["metrics"]["sla_met"] is False
    assert plan["metrics"]["ttft_p90_s"] > MISS_SLA_S
    assert {m["request_class"] for m in plan["metrics"]["sla_misses"]} == {"*", "isl4000-osl500"}
    assert strict.stderr.startswith("SLA MISSED")
    relaxed = invoke("optimize", scenario, "--no-marginals", "--no-verify", "--json", "--best-effort")
    assert relaxed.exit_code == 0, relaxed.output
    assert json.loads(relaxed.stdout)["metrics"]["sla_met"] is False


def test_optimize_verifies_by_default_and_no_verify_skips(tmp_path):
    scenario = micro(tmp_path)
    r = invoke("optimize", scenario, "--no-marginals", "--json", "--perturb", "0")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert plan["metrics"]["sla_met"] is True and "sla_misses" not in plan["metrics"]
    v = plan["verification"]
    assert VERIFIED_KEYS <= set(v) and v["requests"] > 1000 and v["sla_met"] is True
    assert abs(v["ttft_p90_s"] / plan["metrics"]["ttft_p90_s"] - 1) < 0.5  # a real simulation of this plan
    tables = invoke("optimize", scenario, "--no-marginals")
    assert tables.exit_code == 0, tables.output
    first = tables.stdout.splitlines()[0]
    assert first.startswith("SLA met as planned") and "simulated" in first
    assert "verification: the promise beside a simulation" in tables.stdout
    assert "robustness: chips ±20 % (2 cases)" in tables.stdout  # the default --perturb 0.2 line
    skipped = invoke("optimize", scenario, "--no-marginals", "--json", "--no-verify")
    assert skipped.exit_code == 0
    assert "verification" not in json.loads(skipped.stdout)


def test_a_bad_perturb_or_robust_names_the_option(tmp_path):
    for option in ("--perturb", "--robust"):
        r = invoke("optimize", micro(tmp_path), option, "1.5")
        assert r.exit_code == 2, r.output
        assert option.strip("-") in r.stderr and "1.5" in r.stderr
