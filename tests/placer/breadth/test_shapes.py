"""Instance shapes as a planning choice (options.instance_shapes): tp vs tp × pp for a dense model
larger than a node, attention-DP × EP vs tensor-parallel attention for DeepSeek-V3 (placer.shapes)."""

from __future__ import annotations

import json
import pickle

import pytest
from typer.testing import CliRunner

from placer.catalog import get_chip, get_model
from placer.cli.app import app
from placer.errors import InfeasiblePlanError, InputError
from placer.flows import instance
from placer.ilp.data import pdd_architecture, prepare
from placer.optimize import evaluate_plan, optimize
from placer.plan import parse_plan
from placer.problem import resolve
from placer.shapes import DEPModel, Shape, TPAttentionMoEModel, kv_copies
from placer.specs import parse_scenario
from placer.validate import validate

#: Llama-3.1-405B's public config: 810 GB of bf16 weights, more than one node of eight 80 GB H100s holds.
DENSE_405B = {"name": "dense-405b", "attn": "gqa", "layers": 126, "hidden": 16384, "q_heads": 128, "kv_heads": 8,
              "head_dim": 128, "params_total_b": 405.0, "params_active_b": 405.0}


def _dense(tpot_s: float = 0.035, **options) -> dict:
    return {"name": "big", "model": DENSE_405B, "kv_dtype": "bf16", "weight_dtype": "bf16",
            "datacenters": [{"name": "dc", "inventory": {"H100-SXM": 64}}],
            "workload": {"arrival_rps": 1.0, "classes": [
                {"name": "c", "share": 1.0, "input_tokens": 4096, "output_tokens": 256, "hit_rate": 0.5}]},
            "sla": {"ttft_p90_s": 5.0, "tpot_s": tpot_s}, "options": {"tp_degrees": [8, 16, 32], **options}}


def _deepseek(**options) -> dict:
    return {"name": "dsv3", "model": "deepseek-v3", "kv_dtype": "fp8", "weight_dtype": "fp8",
            "datacenters": [{"name": "dc", "inventory": {"H200-SXM": 64}}],
            "workload": {"arrival_rps": 4.0, "classes": [
                {"name": "c", "share": 1.0, "input_tokens": 8192, "output_tokens": 1024, "hit_rate": 0.75}]},
            "sla": {"ttft_p90_s": 3.0, "tpot_s": 0.05}, "options": {"tp_degrees": [8, 16], **options}}


def _solve(scenario: dict):
    problem = resolve(parse_scenario(scenario))
    return problem, optimize(problem)


def _shapes(plan) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for p in plan.pools:
        out.setdefault(p.role, set()).add(f"{p.tp}")
    return out


def test_a_dense_model_too_big_for_a_node_gets_pp_for_prefill_and_tp16_for_a_tight_tpot():
    """405B bf16 does not fit 8 H100s; on 16 the planner weighs tp16 against tp8 × pp2.

    Prefill of a 2K-token chunk is compute bound (~0.17 s of GEMMs on 16 chips), but tp16 spans two
    nodes: its 2 all-reduces per layer × 126 layers cross the 400 Gbit/s NIC (~0.85 s a chunk), while
    pp2 keeps the all-reduces on NVLink and sends one activation per token between the nodes — pp wins
    P by ~2×. Decode is the other way round: a token crosses both stages one after the other and each
    stage re-reads its weights per micro-batch, so even at batch 1 a pp2 step is ~43 ms against ~27 ms
    for tp16, whose all-reduces at decode are a few KB (latency bound). At TPOT 35 ms only tp16 can
    decode: the optimum takes P from pp2 and MD from tp16, and neither shape alone does as well."""
    problem, plan = _solve(_dense())
    assert not instance(problem, "H100-SXM", 8).fits(1)
    assert _shapes(plan) == {"P": {"16-pp2"}, "MD": {"16"}}
    assert validate(problem, plan) == []
    only_tp = optimize(resolve(parse_scenario(_dense(instance_shapes=["tp"]))))
    assert plan.metrics.bcr_requests_per_usd > 1.2 * only_tp.metrics.bcr_requests_per_usd
    with pytest.raises(InfeasiblePlanError, match=r"tp16-pp2: one decode step takes .* > TPOT"):
        optimize(resolve(parse_scenario(_dense(instance_shapes=["pp"]))))


def test_the_milp_sees_every_admissible_shape_as_its_own_pool():
    """At a loose TPOT pp2 decodes too; the candidates hold both shapes of 16 chips, and a shape that
    another beats on every planning figure is named in the notes (it was weighed, not ignored)."""
    problem = resolve(parse_scenario(_dense(tpot_s=0.1)))
    data = prepare(problem, pdd_architecture(problem))
    shapes = {(q.role, f"{q.tp}") for q in data.pools}
    assert {("P", "16-pp2"), ("MD", "16-pp2")} <= shapes
    weighed = shapes | {(n.split()[0], n.split()[2][2:].rstrip(":")) for n in data.notes if "dominated" in n}
    assert {("P", "16"), ("MD", "16"), ("P", "32"), ("P", "32-pp4")} <= weighed
    plan = optimize(problem)
    assert all(p.shape in ("tp", "pp") and (p.pp == 2) == (p.shape == "pp") for p in plan.pools)


def test_mla_kv_is_copied_on_every_chip_under_tp_attention_and_dep_wins_large_batch_decode():
    """DeepSeek-V3 decode on 8 H200s, from first principles.

    MLA caches one latent vector per token and layer (one KV "head" shared by all 128 query heads).
    Tensor-parallel attention splits the query heads over the 8 chips, so every chip needs the whole
    latent KV of every sequence: 8 copies. The instance then holds 8× fewer tokens in the same HBM, and
    every decode step reads the KV 8 times (once per chip). With attention data parallel × expert
    parallel each chip keeps only its own sequences' KV, once; it pays for it with a replica of the
    attention and dense weights per chip (~17 B params) — a heavier weight read per step, so at batch 1
    TP is faster, but at the batch a 50 ms TPOT allows, DEP holds and serves several times more."""
    model, chip = get_model("deepseek-v3"), get_chip("H200-SXM")
    tp = TPAttentionMoEModel(chip, 8, model, "fp8", "fp8")
    dep = DEPModel(chip, 8, model, "fp8", "fp8")
    assert kv_copies(model, 8) == 8 and kv_copies(get_model("llama-3.1-70b"), 8) == 1
    assert dep.weight_bytes > tp.weight_bytes  # the replicas
    assert dep.kv_capacity_tokens > 4 * tp.kv_capacity_tokens
    assert tp.step_s(1, 8704) < dep.step_s(1, 8704)
    tp_batch, dep_batch = tp.max_batch(8704, 0.05), dep.max_batch(8704, 0.05)
    assert dep_batch > 3 * tp_batch
    assert dep_batch / dep.step_s(dep_batch, 8704) > 3 * tp_batch / tp.step_s(tp_batch, 8704)


def test_deepseek_plan_decodes_on_dep_and_beats_tp_only():
    problem, plan = _solve(_deepseek())
    assert _shapes(plan)["MD"] == {"8-dep"}
    assert all(p.shape in ("tp", "dep") and p.pp is None for p in plan.pools)
    assert validate(problem, plan) == []
    only_tp = optimize(resolve(parse_scenario(_deepseek(instance_shapes=["tp"]))))
    assert _shapes(only_tp)["MD"] <= {"8", "16"}
    assert plan.metrics.bcr_requests_per_usd > 1.3 * only_tp.metrics.bcr_requests_per_usd


def test_a_plan_with_shapes_round_trips_and_evaluates_to_its_own_figures():
    problem, plan = _solve(_deepseek())
    data = json.loads(plan.to_json())
    assert {p["shape"] for p in data["pools"] if p["role"] == "MD"} == {"dep"}
    assert all(isinstance(p["tp"], int) for p in data["pools"])
    again = parse_plan(data)
    assert [p.tp for p in again.pools] == [p.tp for p in plan.pools]
    assert all(isinstance(p.tp, Shape) for p in again.pools + again.assignments)
    assert validate(problem, again) == []
    figures = evaluate_plan(problem, again)
    assert figures.metrics.bcr_requests_per_usd == pytest.approx(plan.metrics.bcr_requests_per_usd, rel=1e-3)


def test_plan_rows_without_shape_keep_the_legacy_layout():
    """A plan written before shapes: rows without `shape`; assignments adopt their pool row's shape
    where the row names one, and must name theirs when the same chips come in two shapes."""
    pool = {"role": "MD", "datacenter": "dc", "chip": "H200-SXM", "tp": 8, "count": 1}
    old = parse_plan({"scenario": "s", "pools": [pool]})
    assert type(old.pools[0].tp) is int
    piped = parse_plan({"scenario": "s", "pools": [{**pool, "tp": 16, "pp": 2}]})
    assert piped.pools[0].tp == Shape(16, "pp") and piped.pools[0].shape == "pp"
    assert parse_plan({"scenario": "s", "pools": [{**pool, "tp": 16, "shape": "pp"}]}).pools[0].pp == 2
    assign = {"request_class": "c", "role": "MD", "datacenter": "dc", "chip": "H200-SXM", "tp": 8, "rps": 1.0}
    adopted = parse_plan({"scenario": "s", "pools": [{**pool, "shape": "dep"}], "assignments": [assign]})
    assert adopted.assignments[0].tp == Shape(8, "dep")
    with pytest.raises(InputError, match=r"assignments\.0\.shape"):
        parse_plan({"scenario": "s", "pools": [{**pool, "shape": "dep"}, {**pool, "shape": "tp"}],
                    "assignments": [assign]})
    with pytest.raises(InputError, match=r"pools\.0.*pp"):
        parse_plan({"scenario": "s", "pools": [{**pool, "shape": "tp", "pp": 2}]})


def test_shapes_are_distinct_keys_with_the_chip_count_as_their_value():
    pp, tp, dep = Shape(16, "pp"), Shape(16, "tp"), Shape(16, "dep")
    assert len({pp, tp, dep}) == 3 and pp != 16 and dep != 16 and tp == 16 and {tp: 1}[16] == 1
    assert 3 * pp == 48 and pp.pp == 2 and tp.pp == 1
    assert f"tp{pp}" == "tp16-pp2" and f"tp{dep}" == "tp16-dep" and json.dumps(pp) == str(pp) == "16"
    assert pickle.loads(pickle.dumps(dep)) == dep
    with pytest.raises(ValueError, match="whole 8-chip nodes"):
        Shape(12, "pp")


@pytest.mark.parametrize("options, named", [
    ({"instance_shapes": ["tp16"]}, r"options\.instance_shapes\.0"),
    ({"instance_shapes": []}, r"options\.instance_shapes"),
    ({"instance_shapes": "tp"}, r"options\.instance_shapes"),
    ({"instance_shapes": ["tp"], "pipeline_parallel": True}, r"pipeline_parallel is deprecated"),
])
def test_invalid_instance_shapes_are_rejected_by_name(options, named):
    with pytest.raises(InputError, match=named):
        parse_scenario(_dense(**options))


def test_instance_shapes_that_fit_no_chip_count_of_the_model_exit_2_naming_the_option(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_dense(instance_shapes=["dep"])))
    result = CliRunner().invoke(app, ["optimize", str(path)])
    assert result.exit_code == 2
    assert "options.instance_shapes" in result.output and "dep" in result.output
    assert "Traceback" not in result.output
    path.write_text(json.dumps(_dense(instance_shapes=["tp", "bogus"])))
    result = CliRunner().invoke(app, ["optimize", str(path)])
    assert result.exit_code == 2 and "instance_shapes" in result.output


def test_deprecated_pipeline_parallel_false_leaves_pp_out_and_says_so():
    problem, plan = _solve(_dense(tpot_s=0.1, pipeline_parallel=False))
    assert problem.options.shape_kinds == ("tp", "dep")
    assert all(p.shape == "tp" for p in plan.pools)
    assert any("pipeline_parallel is deprecated" in n for n in plan.notes)


def test_placer_simulate_runs_a_dep_plan(tmp_path):
    scenario, plan_path = tmp_path / "s.json", tmp_path / "plan.json"
    scenario.write_text(json.dumps(_deepseek()))
    result = CliRunner().invoke(app, ["optimize", str(scenario), "--json", "--out", str(plan_path)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["simulate", str(scenario), str(plan_path), "--requests", "300", "--json"])
    assert result.exit_code == 0, result.output
    sim = json.loads(result.output[result.output.index("{"):])
    assert sim["requests"] == 300 and sim["sla_attainment"] > 0.8
    assert any(p["role"] == "MD" and p["tp"] == 8 for p in sim["pools"])


def test_estimate_takes_the_shape_and_prints_it():
    run = CliRunner().invoke
    args = ["estimate", "--model", "deepseek-v3", "--chip", "H200-SXM", "--tp", "8", "--weight-dtype", "fp8",
            "--kv-dtype", "fp8", "--input", "8192", "--output", "1024", "--tpot", "0.05", "--json"]
    dep, tp = (json.loads(run(app, [*args, "--shape", s]).stdout) for s in ("dep", "tp"))
    assert (dep["shape"], dep["layout"]) == ("dep", "attention-dp8 × ep8") and tp["layout"] == "tp8"
    assert dep["max_batch"] > 3 * tp["max_batch"]
    for bad, named in ((["--shape", "tp8"], "shape"), (["--shape", "pp"], "pp")):
        result = run(app, [*args, *bad])
        assert result.exit_code == 2 and named in result.output and "Traceback" not in result.output
    pp = json.loads(run(app, ["estimate", "--model", "llama-3.1-70b", "--chip", "H100-SXM", "--tp", "16",
                              "--shape", "pp", "--json"]).output)
    assert pp["layout"] == "tp8 × pp2"
