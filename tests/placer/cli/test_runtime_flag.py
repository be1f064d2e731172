"""`placer evaluate --runtime` and `placer optimize --runtime`: the plan's TTFT with the executor's measured costs."""

import json

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.flows import instance
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.cli.test_cli import write
from tests.placer.conftest import micro_dict

RUNTIME = {"cores": 8, "slowdown": 1.5, "request_overhead_s": 0.004, "ttft_overhead_s": 0.010,
           "kv_export_bytes_per_s": 4e9, "kv_import_bytes_per_s": 8e9, "kv_export_fixed_s": 0.002,
           "kv_import_fixed_s": 0.003, "token_stream_s": 0.0001, "source": "measure_runtime on host x"}
ONE_CLASS = {"arrival_rps": 2.0, "classes": [
    {"name": "c", "share": 1.0, "input_tokens": 4096, "output_tokens": 256, "hit_rate": 0.5}]}
SAME_DC = {"schema_version": 1, "scenario": "micro", "pools": [
    {"role": "P", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1},
    {"role": "MD", "datacenter": "dc-a", "chip": "H100-SXM", "tp": 1, "count": 1}],
    "routes": [{"request_class": "c", "pipeline": "P-MD", "src": "dc-a", "dst": "dc-a", "rps": 2.0}]}


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _files(tmp_path, runtime=RUNTIME):
    scenario = write(tmp_path, micro_dict(workload=ONE_CLASS))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SAME_DC))
    rt = tmp_path / "runtime.json"
    rt.write_text(json.dumps(runtime))
    return scenario, plan, rt


def test_evaluate_runtime_moves_ttft_by_the_runtime_s_terms_and_tpot_by_its_tokens_messages(tmp_path):
    scenario, plan, rt = _files(tmp_path)
    bare = _invoke("evaluate", scenario, plan, "--json")
    given = _invoke("evaluate", scenario, plan, "--json", "--runtime", rt)
    assert bare.exit_code == 0 and given.exit_code == 0, given.output
    a, b = json.loads(bare.stdout), json.loads(given.stdout)
    # in one datacenter the executor's move is P's export and the decoder's import (they replace the RDMA copy),
    # after the request's path overhead, each CPU second × the host's slowdown; and the KV waits for the
    # decoder's step in progress (at most half its step, which the request's TPOT is: the runtime's, below)
    problem = resolve(parse_scenario(micro_dict(workload=ONE_CLASS)))
    kv = 2048 * problem.kv_bytes_per_token  # the decode-side cache holds the hit: the rest moves
    im = instance(problem, "H100-SXM", 1)
    terms = 1.5 * (0.010 + 0.002 + kv / 4e9 + 0.003 + kv / 8e9) - im.rdma_s(kv, im)
    assert terms > 0.02
    shift = b["metrics"]["ttft_p50_s"] - a["metrics"]["ttft_p50_s"]
    assert terms - 2e-4 <= shift <= terms + b["metrics"]["tpot_s"] / 2
    for q in ("ttft_p90_s", "ttft_p99_s"):  # a shift of the whole law
        assert b["metrics"][q] - a["metrics"][q] == pytest.approx(shift, abs=2e-4), q
    # each step also sends every decoding request its Tokens message (token_stream_s CPU x the slowdown, as the
    # simulator's decoder charges it): a token takes that longer, and more, as the batch it holds grows
    stream = 1.5 * 0.0001
    grown = b["metrics"]["tpot_s"] - a["metrics"]["tpot_s"]
    print(a["metrics"]["tpot_s"], b["metrics"]["tpot_s"], grown)
    assert 1.5 * stream < grown < 0.2 * a["metrics"]["tpot_s"]
    for key in ("cost_usd_per_h", "served_rps", "wan_gbit_per_s", "rld_token_share"):
        assert b["metrics"][key] == pytest.approx(a["metrics"][key]), key
    assert [p["count"] for p in b["pools"]] == [p["count"] for p in a["pools"]]
    note = [n for n in b["notes"] if "executor's measured per-request costs" in n]
    assert note and str(rt) in note[0] and "measure_runtime on host x" in note[0]
    assert not any("executor's measured" in n for n in a["notes"])


def test_optimize_runtime_says_where_its_ttft_came_from(tmp_path):
    scenario, _, rt = _files(tmp_path)
    r = _invoke("optimize", scenario, "--json", "--no-verify", "--no-marginals", "--runtime", rt)
    assert r.exit_code == 0, r.output
    assert any(str(rt) in n and "executor's measured per-request costs" in n for n in json.loads(r.stdout)["notes"])


@pytest.mark.parametrize("runtime,field", [({"cores": 2}, "kv_export_bytes_per_s"),
                                           ({**RUNTIME, "wan_latency_s": -1}, "runtime.wan_latency_s")])
def test_a_bad_runtime_file_is_bad_input_naming_the_file_and_the_field(tmp_path, runtime, field):
    scenario, plan, rt = _files(tmp_path, runtime)
    for args in (("evaluate", scenario, plan), ("optimize", scenario, "--no-verify")):
        r = _invoke(*args, "--runtime", rt)
        assert r.exit_code == 2, r.output
        assert str(rt) in r.output and field in r.output


def test_a_runtime_file_that_is_not_there_is_bad_input(tmp_path):
    scenario, plan, _ = _files(tmp_path)
    r = _invoke("evaluate", scenario, plan, "--runtime", tmp_path / "none.json")
    assert r.exit_code == 2 and "none.json" in r.output
