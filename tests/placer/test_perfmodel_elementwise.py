"""The elementwise kernels of a forward (issue 13, fidelity): norms, residual adds and the gated
activation move activations through HBM between the GEMMs.

Source of the operator list: LLM-Viewer (Yuan et al. 2024, "LLM Inference Unveiled: Survey and
Roofline Model Insights", arXiv 2402.16363; hahnyuan/LLM-Viewer configs/Llama.py: attn_norm,
mlp_norm, attn_add, mlp_add, mlp_act), each kernel counted at its tensors' real sizes: a norm
reads and writes the hidden state, a residual add reads two and writes one, the gated activation
reads gate and up and writes one of the FFN width. TensorRT-LLM's performance page (v0.8-v0.9,
Known Issues) names the activation a separate kernel: "one Matmul followed by a separate SwiGLU
kernel".
"""

import pytest

from placer.catalog import get_chip, get_model
from placer.perfmodel import ACT_BYTES, DECODE_STEP_OVERHEAD_S, InstanceModel


def _im(model: str, tp: int = 1, chip: str = "H100-SXM", dtype: str = "fp8") -> InstanceModel:
    return InstanceModel(get_chip(chip), tp, get_model(model), dtype, dtype)


@pytest.mark.parametrize("model, intermediate", [
    ("llama-2-7b", 11008),  # TensorRT-LLM performance page's ckpt_config.json
    ("llama-3.1-8b", 14336),  # meta-llama/Llama-3.1-8B config.json
    ("llama-3.1-70b", 28672),  # meta-llama/Llama-3.1-70B config.json
])
def test_dense_ffn_width_follows_from_the_parameter_count(model, intermediate):
    assert _im(model, tp=8).ffn_width == pytest.approx(intermediate, rel=0.03)


def test_moe_ffn_width_is_the_visited_experts():
    # DeepSeek-V3 config.json: 8 routed + 1 shared expert of moe_intermediate_size 2048 per token
    assert _im("deepseek-v3", tp=8, chip="H200-SXM").ffn_width == 9 * 2048


def test_elementwise_bytes_per_token_count_two_norms_two_adds_and_the_activation():
    im, m = _im("llama-2-7b"), get_model("llama-2-7b")
    per_token = m.layers * (10 * m.hidden + 3 * im.ffn_width) * ACT_BYTES
    assert im.elementwise_bytes(2048) == pytest.approx(2048 * per_token)
    # tensor parallel: every rank normalises and adds the full hidden state, the activation is split
    tp2 = _im("llama-2-7b", tp=2)
    assert tp2.elementwise_bytes(1) == pytest.approx(m.layers * (10 * m.hidden * 2 + 3 * im.ffn_width) * ACT_BYTES)
    # data-parallel attention (MoE replicas): each token's norms run on one rank only
    ds = _im("deepseek-v3", tp=8, chip="H200-SXM")
    assert ds.elementwise_bytes(1) == pytest.approx(61 * (10 * 7168 + 3 * 9 * 2048) * ACT_BYTES)


def test_elementwise_kernels_add_to_a_batch_one_prefill_at_the_hbm_rate():
    """A 2048-token prompt alone: the norms, adds and activation take bytes / HBM rate on top of the
    GEMMs — a share that grows with the chip's FLOP/byte ratio (FP8 Hopper more than bf16 Ampere)."""
    share = {}
    for chip, dtype in (("H100-SXM", "fp8"), ("A100-80G-SXM", "bf16")):
        im = _im("llama-2-7b", chip=chip, dtype=dtype)
        work, _ = im.prefill_chunk_parts(2048, 0, 2048)
        ew = im.elementwise_s(2048)
        assert work / im.flops_per_s > ew > 0
        share[chip] = ew / (work / im.flops_per_s)
    assert share["H100-SXM"] > 1.5 * share["A100-80G-SXM"]


def test_decode_step_pays_the_elementwise_bytes_of_every_sequence():
    im = _im("llama-3.1-8b")
    small, large = (im.decode_kernels(b, 1, 1024)["elementwise"] for b in (8, 512))
    assert small[0] == large[0] == 0.0  # no FLOPs counted
    assert large[1] == pytest.approx(64 * small[1])  # bytes scale with the tokens of the step
    k = im.decode_kernels(512, 1, 1024)
    assert im.step_s(512, 1024) == pytest.approx(
        sum(max(k[kind]) for kind in ("linear", "attention", "elementwise")) + DECODE_STEP_OVERHEAD_S)
