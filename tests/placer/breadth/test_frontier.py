"""`placer frontier`: the BCR optimum at each SLA beside the baselines, as a user runs it."""

from __future__ import annotations

import csv
import json
import math

import pytest
import yaml

from placer.errors import InputError
from placer.frontier import run_frontier, write_frontier
from placer.specs import parse_scenario
from tests.placer.breadth.test_aggregated import _one_class
from tests.placer.cli.test_cli import run


@pytest.fixture
def short():
    """Short prompts, aggregated pools not in the PDD plan (so agg is the baseline's alone)."""
    return parse_scenario(_one_class(1024, 256, ttft_s=5.0, tpot_s=0.05, rps=5.0, aggregated=False))


def _by(rows, plan):
    return {r["value"]: r for r in rows if r["plan"] == plan}


def test_a_looser_sla_never_lowers_the_optimum_and_agg_overtakes_pd(short, tmp_path):
    """Every plan that meets a TPOT meets any looser one, so the PDD optimum's BCR cannot fall as
    the SLA loosens. Aggregated steps carry a prefill chunk, so at a 10 ms TPOT (Llama-3.1-70B fp8:
    about the decode step alone on two H100s) they hold a small batch and lose to PD; at 20 ms
    and above they batch widely without a P pool and win."""
    rows = run_frontier(short, "tpot", [0.01, 0.02, 0.05], ["agg"], use_ray=False)
    pdd, agg = _by(rows, "pdd"), _by(rows, "agg")
    assert [r["status"] for r in rows] == ["ok"] * 6
    bcr = [pdd[v]["bcr_requests_per_usd"] for v in (0.01, 0.02, 0.05)]
    # never lower, up to the LP's floating-point noise (1e-9: equal optima print 1999.99999999831 and …72)
    assert all(looser >= tighter * (1 - 1e-9) for tighter, looser in zip(bcr, bcr[1:])), bcr
    assert agg[0.01]["bcr_requests_per_usd"] < pdd[0.01]["bcr_requests_per_usd"]
    assert agg[0.02]["bcr_requests_per_usd"] > pdd[0.02]["bcr_requests_per_usd"]
    assert all(r["usd_per_million_output_tokens"] > 0 for r in rows)
    csv_path, png_path = write_frontier(rows, tmp_path / "out", "tpot")
    read = list(csv.DictReader(csv_path.open()))
    assert [(r["value"], r["plan"]) for r in read] == [(str(r["value"]), r["plan"]) for r in rows]
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_sla_no_plan_meets_is_a_row_not_a_crash(short):
    rows = run_frontier(short, "ttft", [0.001], [], use_ray=False)
    assert rows[0]["plan"] == "pdd" and rows[0]["status"] == "no plan" and rows[0]["error"]


@pytest.mark.parametrize(("vary", "values", "baselines", "words"), [
    ("ttft", [0.0], None, "--values"),
    ("tpot", [-1.0], None, "--values"),
    ("ttft", [math.nan], None, "--values"),
    ("ttft", [], None, "--values"),
    ("latency", [1.0], None, "--vary"),
    ("ttft", [1.0], ["pd-of-my-dreams"], "--baselines"),
])
def test_bad_frontier_options_are_named(short, vary, values, baselines, words):
    with pytest.raises(InputError, match=words):
        run_frontier(short, vary, values, baselines, use_ray=False)


def test_cli_prints_rows_and_exits_2_on_bad_values(short, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(short.model_dump(mode="json", exclude_none=True)))
    r = run("frontier", path, "--vary", "ttft", "--values", "2,5", "--baselines", "agg", "--no-ray", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert {(row["value"], row["plan"]) for row in rows} == {(2.0, "pdd"), (2.0, "agg"), (5.0, "pdd"), (5.0, "agg")}
    bad = run("frontier", path, "--vary", "ttft", "--values", "0,1", "--no-ray")
    assert bad.returncode == 2 and "--values" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.ray
def test_frontier_runs_its_sla_values_as_ray_tasks(short):
    local = run_frontier(short, "tpot", [0.05], ["agg"], use_ray=False)
    on_ray = run_frontier(short, "tpot", [0.05], ["agg"], use_ray=True)
    assert [r["bcr_requests_per_usd"] for r in on_ray] == [r["bcr_requests_per_usd"] for r in local]
