"""Instance shapes in `placer export`: each pool launches with its shape's parallel flags (the
engines' own parsers accept them: test_engine_args.py runs the SHAPE_CASES), two shapes of the
same chips are two differently named pools, and a row without ``shape`` launches as before."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from placer.cli.app import app
from placer.export import build_layout, export_plan
from placer.plan import parse_plan
from tests.placer.export.conftest import SHAPE_CASES


def _commands(case: str, engine: str) -> dict[tuple[str, int], list[str]]:
    """(pool name, node) -> args of instance 0, from the commands.json a user gets."""
    plan, settings = SHAPE_CASES[case]
    rows = json.loads(export_plan(parse_plan(plan), engine, settings)["commands.json"])
    return {(c["unit"], c["node"]): c["args"] for c in rows if c["instance"] == 0}


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_a_dep_pool_runs_attention_data_parallel_and_expert_parallel_over_its_nodes():
    sglang = _commands("moe-dep", "sglang")
    leader, worker = sglang[("p-h200-tp16-dep", 0)], sglang[("p-h200-tp16-dep", 1)]
    for args in (leader, worker):
        assert [_flag(args, f) for f in ("--tp-size", "--attn-dp-size", "--ep-size", "--nnodes")] == \
            ["16", "16", "16", "2"]
    assert _flag(worker, "--node-rank") == "1" and _flag(worker, "--dist-init-addr") == "a-p-h200-tp16-dep-0:5000"
    vllm = _commands("moe-dep", "vllm")[("d-h200-tp8-dep", 0)]
    assert [_flag(vllm, "--tensor-parallel-size"), _flag(vllm, "--data-parallel-size")] == ["1", "8"]
    assert "--enable-expert-parallel" in vllm


def test_a_plain_tp_pool_beside_a_dep_pool_of_the_same_chips_keeps_tensor_parallel_flags():
    sglang = _commands("moe-dep", "sglang")
    tp, dep = sglang[("p-h200-tp8", 0)], sglang[("d-h200-tp8-dep", 0)]
    assert _flag(tp, "--tp-size") == "8" and "--attn-dp-size" not in tp and "--ep-size" not in tp
    assert _flag(dep, "--attn-dp-size") == "8"


def test_a_pp_pool_is_tp8_per_node_times_pipeline_stages():
    sglang = _commands("dense-pp", "sglang")[("d-h100-sxm-tp24-pp3", 2)]
    assert [_flag(sglang, f) for f in ("--tp-size", "--pp-size", "--nnodes", "--node-rank")] == ["8", "3", "3", "2"]
    vllm = _commands("dense-pp", "vllm")[("p-h100-sxm-tp16-pp2", 1)]
    assert [_flag(vllm, "--tensor-parallel-size"), _flag(vllm, "--pipeline-parallel-size")] == ["8", "2"]
    assert "--headless" in vllm


def test_the_readme_names_each_shape():
    plan, settings = SHAPE_CASES["moe-dep"]
    layout = build_layout(parse_plan(plan), settings)
    assert [p.kind for p in layout.pools] == ["dep", "tp", "dep"]
    readme = export_plan(parse_plan(plan), "sglang", settings)["README.md"]
    assert "| 16-dep |" in readme and "| 8 |" in readme and "| 8-dep |" in readme


def test_placer_export_of_a_shaped_plan_file_and_a_bad_shape_exits_2_naming_it(tmp_path):
    plan, _ = SHAPE_CASES["dense-pp"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(path), "--format", "vllm", "--model", "meta-llama/Llama-3.1-405B",
                                 "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    script = (tmp_path / "out" / "a" / "p-h100-sxm-tp16-pp2.sh").read_text()
    assert "--pipeline-parallel-size 2" in script and "--tensor-parallel-size 8" in script

    bad = {**plan, "pools": [{**plan["pools"][0], "shape": "ep"}, *plan["pools"][1:]]}
    path.write_text(json.dumps(bad))
    result = runner.invoke(app, ["export", str(path), "--format", "vllm", "--model", "m", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "shape" in result.output and "ep" in result.output
    assert "Traceback" not in result.output
