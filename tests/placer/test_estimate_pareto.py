"""``placer estimate --pareto``: the decode frontier of tokens/s per GPU against tokens/s per user."""

import json

import pytest
from typer.testing import CliRunner

from placer.cli.app import app
from placer.errors import InputError
from placer.estimate import estimate
from placer.estimate_pareto import DEFAULT_TPS, batch_grid, pareto

POINT_KEYS = {"chips", "shape", "layout", "batch", "tpot_s", "tokens_per_s_per_gpu", "tokens_per_s_per_user",
              "decode_tokens_per_s", "prefill_tokens_per_s_per_gpu", "fits_memory", "meets_tpot", "source"}


def _run(*args):
    return CliRunner().invoke(app, ["estimate", *args])


def _dominated(p, q) -> bool:
    """Whether ``q`` dominates ``p``: at least as fast per user and per GPU, faster in one."""
    return (q.tokens_per_s_per_user >= p.tokens_per_s_per_user and q.tokens_per_s_per_gpu >= p.tokens_per_s_per_gpu
            and (q.tokens_per_s_per_user, q.tokens_per_s_per_gpu) != (p.tokens_per_s_per_user, p.tokens_per_s_per_gpu))


@pytest.mark.parametrize(("model", "chip"), [("llama-3.1-70b", "H100-SXM"), ("deepseek-v3", "H200-SXM")])
def test_points_are_non_dominated_and_trade_per_user_speed_for_per_gpu_throughput(model, chip):
    front = pareto(model, chip)
    points = front.points
    assert len(points) >= 5 and front.candidates > len(points)
    assert not any(_dominated(p, q) for p in points for q in points)
    per_user = [p.tokens_per_s_per_user for p in points]
    per_gpu = [p.tokens_per_s_per_gpu for p in points]
    assert per_user == sorted(per_user, reverse=True) and len(set(per_user)) == len(per_user)
    assert per_gpu == sorted(per_gpu) and len(set(per_gpu)) == len(per_gpu)  # faster per user ⇒ less per GPU
    assert len({p.chips for p in points}) > 1  # instance shapes are swept, not one tp


def test_each_point_is_what_estimate_says_for_that_shape_and_batch():
    for p in pareto("deepseek-v3", "H200-SXM", mtp_accept=1.6).points[::4]:
        e = estimate("deepseek-v3", "H200-SXM", p.chips, batch=p.batch, shape=p.shape, mtp_accept=1.6)
        assert p.tokens_per_s_per_gpu == pytest.approx(e.tokens_per_s_per_gpu)
        assert p.tokens_per_s_per_user == pytest.approx(e.tokens_per_s_per_user)
        assert p.tpot_s == pytest.approx(e.tpot_s) and p.source == e.source.split("decode: ")[-1]


def test_batches_whose_kv_does_not_fit_are_excluded_and_said_so():
    """llama-3.1-70b bf16 on 2 x H100: 19 sequences of 2,304 tokens of KV fit beside the weights, so
    no point of tp 2 has more, and the frontier says which batches it left out; on one H100 the weights
    alone do not fit."""
    front = pareto("llama-3.1-70b", "H100-SXM", [1, 2, 4])
    cap = estimate("llama-3.1-70b", "H100-SXM", 2).max_batch
    assert cap == 19
    candidates = pareto("llama-3.1-70b", "H100-SXM", [2]).candidates
    assert candidates == len([b for b in batch_grid(2048) if b <= cap]) + 1  # the grid below the cap, and the cap
    assert all(p.batch <= estimate("llama-3.1-70b", "H100-SXM", p.chips).max_batch and p.fits_memory
               for p in front.points)
    by_tp = {e["chips"]: e for e in front.excluded}
    assert min(by_tp[2]["batches"]) > cap and "19 sequences" in by_tp[2]["reason"]
    assert "does not fit" in by_tp[1]["reason"] and "batches" not in by_tp[1]
    assert 1 not in {p.chips for p in front.points}


def test_a_tpot_marks_the_points_that_meet_it_and_adds_the_largest_batch_that_does():
    front = pareto("llama-3.1-70b", "H100-SXM", [4, 8], tpot_s=0.02)
    assert all(p.meets_tpot == (p.tpot_s <= 0.02) for p in front.points)
    assert {True, False} == {p.meets_tpot for p in front.points}
    best = estimate("llama-3.1-70b", "H100-SXM", 8, tpot_s=0.02)
    assert any((p.chips, p.batch) == (8, best.decode_batch) for p in front.points)
    assert all(p.meets_tpot is None for p in pareto("llama-3.1-70b", "H100-SXM", [4]).points)


def test_the_cli_returns_the_frontier_as_a_list_of_points():
    result = _run("--model", "deepseek-v3", "--chip", "H200-SXM", "--pareto", "--tpot", "0.05", "--json")
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)
    assumed = {"model", "chip", "engine", "input_tokens", "output_tokens", "hit_rate", "weight_dtype", "kv_dtype",
               "chunk_tokens", "mtp_accept", "target_tpot_s"}
    assert isinstance(points, list) and points
    assert all(set(p) == POINT_KEYS | assumed for p in points)
    assert all((p["input_tokens"], p["output_tokens"], p["target_tpot_s"]) == (2048, 256, 0.05) for p in points)
    assert {p["chips"] for p in points} <= set(DEFAULT_TPS)
    table = _run("--model", "llama-3.1-70b", "--chip", "H100-SXM", "--pareto", "--tp", "4", "--tp", "8").output
    assert "decode frontier" in table and "tp8" in table and "tp4" in table and "tp16" not in table
    assert "left out" in table and "e+" not in table


@pytest.mark.parametrize(("args", "named"), [
    (["--pareto", "--tp", "4", "--batch", "8"], "--batch"),
    (["--pareto", "--engine", "trtllm==", "--tp", "4"], "--engine"),
    (["--pareto", "--tp", "1"], "does not fit"),
    (["--pareto", "--shape", "dep", "--tp", "4"], "dep"),
])
def test_bad_pareto_input_exits_2_naming_it(args, named):
    result = _run("--model", "llama-3.1-70b", "--chip", "H100-SXM", *args)
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output


def test_engine_and_profiles_reach_every_point(tmp_path):
    from pathlib import Path

    csv = Path(__file__).resolve().parents[2] / "docs" / "profiles" / "llama-3.1-8b-h100-example.csv"
    front = pareto("llama-3.1-8b", "H100-SXM", [1], input_tokens=1000, output_tokens=100, profiles=csv)
    assert any(p.source.startswith("measured (") for p in front.points)
    sglang = pareto("llama-3.1-8b", "H100-SXM", [1], engine="sglang")
    assert sglang.engine == "sglang" and all("measured kernels (sglang" in p.source for p in sglang.points)
    with pytest.raises(InputError, match="--engine"):
        pareto("llama-3.1-8b", "H100-SXM", [1], engine="tgi")
