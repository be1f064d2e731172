"""``placer estimate``: one instance's figures, through the library and the CLI face."""

import json

import pytest
from typer.testing import CliRunner

from placer.cli.app import app
from placer.errors import InputError
from placer.estimate import estimate

KEYS = {"prefill_s", "prefill_tokens_per_s", "decode_batch", "decode_step_s", "decode_tokens_per_s", "max_batch",
        "kv_bytes_per_token", "ttft_s", "bound", "source", "shape", "layout",
        "tpot_s", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "prefill_tokens_per_s_per_gpu", "chips",
        "input_tokens", "output_tokens", "hit_rate", "weight_dtype", "kv_dtype", "chunk_tokens", "mtp_accept", "engine",
        "decode_context_tokens", "batch_from", "target_tpot_s"}
BOUNDS = {"compute", "memory", "communication"}


def _run(*args):
    return CliRunner().invoke(app, ["estimate", *args])


def test_json_has_every_contract_key_and_names_the_bounds():
    result = _run("--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == KEYS
    assert set(data["bound"]) == {"prefill", "decode"} and set(data["bound"].values()) <= BOUNDS
    assert data["source"] == "roofline"
    assert data["ttft_s"] == data["prefill_s"] > 0  # one instance streams its first token after prefill


def test_the_table_shows_every_figure():
    result = _run("--model", "deepseek-v3", "--chip", "H200-SXM", "--tp", "8", "--tpot", "0.05")
    assert result.exit_code == 0, result.output
    for key in KEYS - {"bound", "source", "chips", "chunk_tokens", "mtp_accept", "batch_from", "target_tpot_s"}:
        assert key in result.output


def test_decode_is_monotone_in_batch():
    steps = [estimate("llama-3.1-70b", "H100-SXM", 4, batch=b) for b in (1, 8, 64, 256)]
    assert [e.decode_step_s for e in steps] == sorted(e.decode_step_s for e in steps)
    assert [e.decode_tokens_per_s for e in steps] == sorted(e.decode_tokens_per_s for e in steps)


def test_step_grows_with_context_and_prefill_with_prompt_tokens():
    short, long = (estimate("llama-3.1-8b", "H200-SXM", 1, input_tokens=i, batch=32) for i in (1024, 32768))
    assert long.decode_step_s > short.decode_step_s
    assert long.prefill_s > short.prefill_s
    assert estimate("llama-3.1-8b", "H200-SXM", 1, input_tokens=32768, hit_rate=0.9).prefill_s < long.prefill_s


def test_a_tighter_tpot_gives_a_smaller_batch_that_meets_it():
    loose, tight = (estimate("llama-3.1-70b", "H200-SXM", 2, tpot_s=t) for t in (0.1, 0.03))
    assert tight.decode_batch < loose.decode_batch
    assert tight.decode_step_s <= 0.03


def test_mtp_accepted_tokens_raise_decode_throughput():
    plain = estimate("deepseek-v3", "H200-SXM", 8, batch=256)
    mtp = estimate("deepseek-v3", "H200-SXM", 8, batch=256, mtp_accept=1.8)
    assert mtp.decode_tokens_per_s > plain.decode_tokens_per_s
    assert mtp.decode_tokens_per_s == pytest.approx(256 * 1.8 / mtp.decode_step_s)


def test_a_slower_measured_chip_profile_is_used_and_named(tmp_path):
    from tests.profiler.conftest import synthetic_profile, write_profile

    path = write_profile(tmp_path / "h100.json", synthetic_profile("H100-SXM", 0.4, 0.6))
    roofline = estimate("llama-3.1-8b", "H100-SXM", 1, batch=64)
    measured = estimate("llama-3.1-8b", "H100-SXM", 1, batch=64, profiles=path)
    assert roofline.source == "roofline"
    assert measured.source.startswith("roofline with measured efficiencies (profile h100.json")
    assert measured.prefill_s > roofline.prefill_s and measured.decode_step_s > roofline.decode_step_s
    result = _run("--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--profiles", str(path), "--json")
    assert json.loads(result.stdout)["source"] == measured.source
    with pytest.raises(InputError, match="profiles"):
        estimate("llama-3.1-8b", "H100-SXM", 1, profiles=tmp_path / "missing.json")


@pytest.mark.parametrize(("args", "named"), [
    (["--model", "gpt-7", "--chip", "H100-SXM", "--tp", "1"], "gpt-7"),
    (["--model", "llama-3.1-8b", "--chip", "H9000", "--tp", "1"], "H9000"),
    (["--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "0"], "tp"),
    (["--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--weight-dtype", "int3"], "int3"),
    (["--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--kv-dtype", "fp4"], "fp4"),
    (["--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--hit", "1.5"], "hit"),
    (["--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--batch", "8", "--tpot", "0.05"], "--tpot"),
    (["--model", "llama-3.1-70b", "--chip", "H100-SXM", "--tp", "1"], "does not fit"),
])
def test_bad_input_exits_2_naming_the_value(args, named):
    result = _run(*args)
    assert result.exit_code == 2
    assert named in result.output
    assert "Traceback" not in result.output


def test_every_dtype_a_scenario_accepts_is_estimated_and_fp4_needs_a_chip_with_its_rate():
    """``--weight-dtype``/``--kv-dtype`` take what a scenario may name (placer.specs): fewer weight
    bytes make a memory-bound decode step shorter; fp4 on a chip without an fp4 rate is exit 2."""
    steps = {w: estimate("llama-3.1-70b", "B200", 2, weight_dtype=w, kv_dtype="fp8", batch=8).decode_step_s
             for w in ("bf16", "fp8", "int8", "int4", "fp4")}
    assert steps["fp4"] < steps["fp8"] < steps["bf16"]
    assert steps["int4"] < steps["int8"] < steps["bf16"]
    result = _run("--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--weight-dtype", "fp4")
    assert result.exit_code == 2 and "fp4" in result.output and "H100-SXM" in result.output


def test_estimate_answers_from_a_measured_table_at_its_grid_points_and_between_them():
    """docs/profiles/llama-3.1-8b-h100-example.csv: decode 8 x 1024 → 8.1 ms, 8 x 8192 → 13.0 ms;
    prefill of 2048 new tokens after none cached → 62 ms (one forward: chunk ≥ 2048)."""
    from pathlib import Path

    csv = Path(__file__).resolve().parents[2] / "docs" / "profiles" / "llama-3.1-8b-h100-example.csv"
    at = {ctx: estimate("llama-3.1-8b", "H100-SXM", 1, input_tokens=ctx - 64, output_tokens=128, batch=8,
                        profiles=csv) for ctx in (1024, 8192)}
    assert at[1024].decode_step_s == pytest.approx(0.0081, rel=1e-6)
    assert at[8192].decode_step_s == pytest.approx(0.0130, rel=1e-6)
    assert at[1024].source.startswith("measured (")
    between = [estimate("llama-3.1-8b", "H100-SXM", 1, input_tokens=ctx - 64, output_tokens=128, batch=8,
                        profiles=csv).decode_step_s for ctx in (1024, 2048, 4096, 8192)]
    assert between == sorted(between) and 0.0081 < between[1] < between[2] < 0.0130
    prompt = estimate("llama-3.1-8b", "H100-SXM", 1, input_tokens=2048, output_tokens=1, batch=1, profiles=csv)
    assert prompt.prefill_s == pytest.approx(0.062, rel=1e-6)


def test_bench_reads_an_engine_chosen_trtllm_bench_batch_from_trtllm_benchs_own_heuristic():
    """NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py: requests = 0.90 × (chips × GiB −
    params × weight bytes) / (2·layers·max(tp, kv_heads)·head·kv bytes × (I + O)); batch rounded up
    (32s under 256, min 64; 128s under 1024), tokens = requests × (1 + I/O), at least 2048 and I + batch.
    DeepSeek-R1 on 8 × H200 (140 GiB), 1000/1000, fp8 KV with the HF config's 128 kv heads of
    7168/128 = 56: 0.9 × (1120 − 625) GiB / (874,496 B × 2000) ≈ 274 → batch 384, tokens 2048."""
    from bench.bench_fidelity import trtllm_bench_limits

    assert trtllm_bench_limits("deepseek-v3", "H200-SXM", 8, "fp8", "fp8", 1000, 1000) == (384, 2048)
    # Llama-3.1-8B fp8 on one H100, bf16 KV, 128/2048: ≈ 243 requests → 256; fp8 KV: ≈ 487 → 512
    assert trtllm_bench_limits("llama-3.1-8b", "H100-SXM", 1, "bf16", "fp8", 128, 2048)[0] == 256
    assert trtllm_bench_limits("llama-3.1-8b", "H100-SXM", 1, "fp8", "fp8", 128, 2048)[0] == 512
    # a 20,000-token prompt without chunked prefill: the forward budget covers the prompt and the batch
    batch, tokens = trtllm_bench_limits("llama-3.1-8b", "H200-SXM", 1, "fp8", "fp8", 20000, 2000)
    assert tokens == 20000 + batch


def test_per_gpu_and_per_user_figures_are_the_instance_figures_read_per_chip_and_per_sequence():
    """Per GPU × chips = the instance's output tokens/s; per user = 1 / TPOT; TPOT = step / accept (MTP
    emits ``accept`` tokens a step); prefill per GPU × chips = the instance's input tokens/s."""
    for e in (estimate("llama-3.1-70b", "H100-SXM", 4, batch=64),
              estimate("deepseek-v3", "H200-SXM", 8, batch=256, mtp_accept=1.8),
              estimate("llama-3.1-70b", "H100-SXM", 16, shape="pp", tpot_s=0.05)):
        assert e.tokens_per_s_per_gpu * e.chips == pytest.approx(e.decode_tokens_per_s)
        assert e.prefill_tokens_per_s_per_gpu * e.chips == pytest.approx(e.prefill_tokens_per_s)
        assert e.tpot_s == pytest.approx(e.decode_step_s / e.mtp_accept)
        assert e.tokens_per_s_per_user == pytest.approx(1 / e.tpot_s)
    assert estimate("llama-3.1-70b", "H100-SXM", 16, shape="pp", batch=8).chips == 16


def test_the_request_and_engine_assumed_are_echoed_in_json_and_table():
    args = ["--model", "llama-3.1-70b", "--chip", "H100-SXM", "--tp", "4", "--input", "3000", "--output", "700",
            "--hit", "0.25"]
    data = json.loads(_run(*args, "--json").stdout)
    assert (data["input_tokens"], data["output_tokens"], data["hit_rate"]) == (3000, 700, 0.25)
    assert (data["weight_dtype"], data["kv_dtype"], data["engine"], data["chips"]) == ("bf16", "bf16", "roofline", 4)
    table = _run(*args).output
    for shown in ("input_tokens", "3,000", "output_tokens", "700", "hit_rate", "0.25 ", "engine", "roofline"):
        assert shown in table


def test_the_table_formats_every_figure_alike_without_exponents():
    """The issue's complaint: ``4.031e+04`` beside ``4,734`` — big figures get thousands separators."""
    table = _run("--model", "llama-3.1-70b", "--chip", "H100-SXM", "--tp", "4").output
    assert "e+" not in table and "e-0" not in table
    assert "327,680" in table  # kv_bytes_per_token, printed 3.277e+05 before
    data = json.loads(_run("--model", "llama-3.1-70b", "--chip", "H100-SXM", "--tp", "4", "--json").stdout)
    assert f"{data['prefill_tokens_per_s']:,.0f}" in table


def test_engine_is_validated_named_and_the_roofline_default_unchanged():
    result = _run("--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--engine", "bogus")
    assert result.exit_code == 2 and "--engine" in result.output and "bogus" in result.output
    assert "Traceback" not in result.output
    result = _run("--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--engine", "vllm==0.24.0", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["engine"] == "vllm==0.24.0"
    with pytest.raises(InputError, match="--engine.*'sglang=='"):
        estimate("llama-3.1-8b", "H100-SXM", 1, engine="sglang==")
    assert estimate("llama-3.1-8b", "H100-SXM", 1, batch=8) == estimate("llama-3.1-8b", "H100-SXM", 1, batch=8,
                                                                        engine="roofline")


def test_tp_is_required_without_pareto_and_single():
    assert "--tp" in _run("--model", "llama-3.1-8b", "--chip", "H100-SXM").output
    result = _run("--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--tp", "2")
    assert result.exit_code == 2 and "--pareto" in result.output


def test_an_engine_whose_kernels_do_not_answer_is_said_to_fall_back_to_the_roofline(monkeypatch):
    """Where no measured kernel of the engine covers the chip, the figures are the roofline's and the
    source says so, rather than a bare "roofline" beside "engine: vllm"."""
    import placer.estimate as module

    monkeypatch.setattr(module, "engine_model", lambda base, engine: base)
    e = estimate("llama-3.1-8b", "H100-SXM", 1, batch=8, engine="vllm")
    assert e.engine == "vllm" and e.source == "roofline: no measured vllm kernels answered for H100-SXM"
    assert e.decode_step_s == estimate("llama-3.1-8b", "H100-SXM", 1, batch=8).decode_step_s


def test_an_engine_with_shipped_kernels_answers_and_is_named_and_an_unshipped_version_is_refused():
    """H100 is covered by the shipped vLLM tables (placer/kernels/data/h100_sxm): the figures move off the
    roofline and the source names the engine, its version and the chip's tables; a version placer ships
    no tables for is exit 2 naming it."""
    roofline = estimate("llama-3.1-70b", "H100-SXM", 4, batch=64)
    vllm = estimate("llama-3.1-70b", "H100-SXM", 4, batch=64, engine="vllm")
    assert vllm.engine == "vllm" and "measured kernels (vllm" in vllm.source and "h100_sxm" in vllm.source
    assert vllm.decode_step_s != roofline.decode_step_s
    assert vllm.tokens_per_s_per_gpu * vllm.chips == pytest.approx(vllm.decode_tokens_per_s)
    result = _run("--model", "llama-3.1-8b", "--chip", "H100-SXM", "--tp", "1", "--engine", "vllm==9.9")
    assert result.exit_code == 2 and "--engine" in result.output and "9.9" in result.output
