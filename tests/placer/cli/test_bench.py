"""``placer bench``: the measured figures beside the plan's promise and its simulation; bad input named, exit 2;
an endpoint that does not answer, exit 1; never a traceback."""

from __future__ import annotations

import json
import socket

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.loadgen.stats import KEYS
from tests.placer.loadgen.support import foreign_app, scenario_dict
from tests.support import live_server


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The small scenario and its plan (placer optimize, as a user makes it)."""
    tmp = tmp_path_factory.mktemp("bench")
    scenario = tmp / "s.yaml"
    scenario.write_text(yaml.safe_dump(scenario_dict()))
    plan = tmp / "plan.json"
    result = CliRunner().invoke(app, ["optimize", str(scenario), "--no-verify", "--json", "--out", str(plan)])
    assert result.exit_code == 0, result.output
    return scenario, plan


def bench(*args):
    return CliRunner().invoke(app, ["bench", *map(str, args)])


def test_json_has_the_contract_keys_measured_predicted_and_simulated(files, tmp_path):
    scenario, plan = files
    with live_server(foreign_app(step_s=0.001)) as url:
        result = bench(url, "--scenario", scenario, "--plan", plan, "--requests", 30, "--rate", 100,
                       "--simulate-requests", 500, "--json", "--request-log", tmp_path / "log.jsonl")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # stdout holds the JSON alone
    assert set(KEYS) <= set(data) and data["requests"] == 30 and data["errors"] == 0
    promise = json.loads(plan.read_text())["metrics"]
    assert set(data["predicted"]) == set(KEYS) and data["predicted"]["ttft_p90_s"] == promise["ttft_p90_s"]
    assert set(data["simulated"]) == set(KEYS) and data["simulated"]["requests"] >= 500
    # the error of each: (measured − reference) / reference of the figures printed, to four decimals
    m, p = data["ttft_p90_s"], data["predicted"]["ttft_p90_s"]
    assert data["error"]["vs_predicted"]["ttft_p90_s"] == round((m - p) / p, 4)
    assert "ttft_p90_s" in data["error"]["vs_simulated"]
    assert data["interrupted"] is False and len((tmp_path / "log.jsonl").read_text().splitlines()) == 30


def test_table_shows_promise_simulation_and_errors(files):
    scenario, plan = files
    with live_server(foreign_app(step_s=0.001)) as url:
        result = bench(url, "--scenario", scenario, "--plan", plan, "--requests", 10, "--rate", 100,
                       "--simulate-requests", 200)
    assert result.exit_code == 0, result.output
    text = result.stdout
    for word in ("measured", "predicted", "simulated", "ttft_p90_s", "goodput_rps", " %"):
        assert word in text
    assert "the plan's promise is at 40 req/s; the bench offered 100" in text


def test_the_workload_fit_reads_what_bench_wrote(files, tmp_path):
    scenario, _ = files
    log = tmp_path / "log.jsonl"
    with live_server(foreign_app(step_s=0.0)) as url:
        assert bench(url, "--scenario", scenario, "--requests", 80, "--rate", 400, "--request-log", log).exit_code == 0
    fitted = CliRunner().invoke(app, ["workload", "fit", str(log)])
    assert fitted.exit_code == 0, fitted.output
    classes = yaml.safe_load(fitted.stdout.split("\n", 1)[1])["workload"]["classes"]
    assert max(c["hit_rate"] for c in classes) == pytest.approx(0.75, abs=0.02)
    assert {c["output_tokens"] for c in classes} == {8}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, code, said", [
    (["http://127.0.0.1:1", "--scenario", "missing.yaml"], 2, "missing.yaml"),
    (["ftp://127.0.0.1/x", "--scenario", "{s}"], 2, "URL"),
    (["http://127.0.0.1:1", "--scenario", "{s}", "--requests", "0"], 2, "--requests"),
    (["http://127.0.0.1:1", "--scenario", "{s}", "--plan", "nope.json"], 2, "nope.json"),
    (["http://127.0.0.1:{port}", "--scenario", "{s}", "--requests", "3"], 1, "cannot reach"),
])
def test_bad_input_exit_2_and_an_unreachable_endpoint_exit_1_without_a_traceback(files, args, code, said):
    scenario, _ = files
    port = _free_port()
    result = bench(*[a.format(s=scenario, port=port) for a in args])
    assert result.exit_code == code, result.output
    assert said in result.output and "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
