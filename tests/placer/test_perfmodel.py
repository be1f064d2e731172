import math

import pytest

from placer.catalog import get_chip, get_model
from placer.perfmodel import InstanceModel
from placer.queueing import WaitModel, wan_transfer_s


@pytest.fixture
def h100x2():
    return InstanceModel(get_chip("H100-SXM"), 2, get_model("llama-3.1-70b"), "bf16", "bf16")


def test_prefill_gets_cheaper_as_the_hit_rate_rises(h100x2):
    times = [h100x2.prefill_s(16384, h) for h in (0.0, 0.5, 0.9, 0.99)]
    assert times == sorted(times, reverse=True)
    assert times[0] > 5 * times[2]


def test_prefill_has_a_quadratic_attention_part(h100x2):
    # Doubling a fresh prompt more than doubles the time once attention matters.
    assert h100x2.prefill_s(65536, 0.0) > 2.05 * h100x2.prefill_s(32768, 0.0)


def test_decode_step_grows_with_batch_and_context(h100x2):
    assert h100x2.step_s(1, 4096) < h100x2.step_s(32, 4096) < h100x2.step_s(32, 32768)


def test_max_batch_meets_tpot_and_memory(h100x2):
    b = h100x2.max_batch(8192, 0.05)
    assert b >= 1
    assert h100x2.step_s(b, 8192) <= 0.05
    assert b == 1024 or h100x2.step_s(b + 1, 8192) > 0.05 or (b + 1) * 8192 > h100x2.kv_capacity_tokens
    assert h100x2.max_batch(8192, 1e-4) == 0  # no batch meets an impossible TPOT


def test_weights_must_fit():
    one = InstanceModel(get_chip("H100-SXM"), 1, get_model("llama-3.1-70b"), "bf16", "bf16")
    assert not one.fits(1)  # 140 GB of weights on an 80 GB chip
    assert InstanceModel(get_chip("H100-SXM"), 4, get_model("llama-3.1-70b"), "bf16", "bf16").fits(65536)


def test_sparse_attention_reads_less_kv_at_long_context():
    m = get_model("deepseek-v3.2")
    im = InstanceModel(get_chip("H200-SXM"), 8, m, "fp8", "fp8")
    dense = 65536 * im.kv_bytes_per_token
    assert im.kv_read_bytes(65536) < dense / 3  # top-2048 + indexer keys
    assert im.kv_read_bytes(1000) == pytest.approx(1000 * im.kv_bytes_per_token)


def test_slower_measured_chip_is_slower():
    m = get_model("llama-3.1-8b")
    fast = InstanceModel(get_chip("H100-SXM"), 1, m, "bf16", "bf16")
    slow = InstanceModel(get_chip("H100-SXM").with_changes(compute_efficiency=0.3), 1, m, "bf16", "bf16")
    assert slow.prefill_s(8192, 0.0) > fast.prefill_s(8192, 0.0)


def test_wan_transfer_slows_with_utilisation_and_adds_rtt():
    b = 1e9
    idle = wan_transfer_s(b, 25e9 / 8, 0.03, 0.0)
    assert idle == pytest.approx(0.32 + 0.03)
    assert wan_transfer_s(b, 25e9 / 8, 0.03, 0.5) == pytest.approx(0.64 + 0.03)
    assert wan_transfer_s(b, 0.0, 0.03, 0.0) == math.inf
    assert wan_transfer_s(0, 25e9 / 8, 0.03, 0.0) == 0.0


def test_wait_model_matches_pollaczek_khinchine_and_its_tail():
    w = WaitModel(rho=0.5, mean_s=1.0, second_moment_s2=2.0)  # exponential service: M/M/1
    assert w.mean_wait_s == pytest.approx(1.0)  # ρ/(μ-λ) = 1 for M/M/1 at ρ=.5, μ=1
    assert w.prob_exceeds(0.0) == pytest.approx(0.5)
    assert w.prob_exceeds(2.0) == pytest.approx(0.5 * math.exp(-1.0))  # M/M/1 exact: ρ e^{-(μ-λ)t}
    assert w.quantile_s(0.4) == 0.0
    assert w.prob_exceeds(w.quantile_s(0.9)) == pytest.approx(0.1)


# ---- the physics of issue 13, each with its formula and source ------------------------------
from placer.perfmodel import (  # noqa: E402
    EP_COMM_SM_FRACTION, EXPERT_LOAD_BALANCE, FP8_SCALE_GROUP, KERNEL_LAUNCH_S, MAX_BATCH_PER_CHIP,
    NCCL_NVLINK_HOP_S, NCCL_RING_BASE_S, gemm_efficiency,
)


def _ds(chip="H100-SXM", tp=32, **kw):
    return InstanceModel(get_chip(chip), tp, get_model("deepseek-v3"), "fp8", "bf16", **kw)


def test_ep_prefill_all_to_all_sends_fp8_dispatch_and_bf16_combine_once_per_node():
    # DeepEP normal kernels (deepseek-ai/DeepEP README): FP8 dispatch (hidden B + an fp32 scale per
    # 128), BF16 combine; DeepSeek-V3 node-limited routing: a token reaches at most 4 nodes, so with
    # 4 nodes it crosses the NIC min(8, 4, 4)·3/4 = 3 times per MoE layer.
    im, tokens = _ds(tp=32), 32 * 16384
    per_token = 7168 * (1 + 4 / FP8_SCALE_GROUP) + 7168 * 2
    nic = get_chip("H100-SXM").nic_bytes_per_s
    volume_s = 58 * (tokens / 32) * 3 * per_token / (nic * EXPERT_LOAD_BALANCE)  # the busiest rank receives more
    assert im.comm_s(tokens, prefill=True) == pytest.approx(volume_s, rel=0.01)
    # decode (low-latency kernels) sends each token to each of its 8 experts: more bytes
    assert im.comm_s(tokens) > 2 * im.comm_s(tokens, prefill=True)


def test_expert_gemms_run_below_dense_gemms_under_expert_parallelism():
    # load balance 0.85 (SGLang 96-H100 blog: EPLB vs perfect balance) × SMs left to GEMMs while
    # DeepEP runs on 20 of 132 (DeepSeek-V3 report §3.2.2)
    assert _ds(tp=32).expert_rate_factor == pytest.approx(EXPERT_LOAD_BALANCE * (1 - EP_COMM_SM_FRACTION))
    assert _ds(chip="H200-SXM", tp=1).expert_rate_factor == 1.0  # no all-to-all on one chip
    dense = InstanceModel(get_chip("H100-SXM"), 32, get_model("llama-3.1-70b"), "fp8", "bf16")
    assert dense.expert_rate_factor == 1.0


def test_mla_prefill_uses_the_multi_head_form_at_the_bf16_rate():
    # DeepSeek-V3: fresh tokens 2·61·128·(128+64+128) ≈ 5.0 MFLOP per pair, absorbed
    # 2·61·128·(2·512+64) ≈ 17.0 MFLOP; the core attention runs at the bf16 rate.
    m = get_model("deepseek-v3")
    assert m.mha_flops_per_token_pair() == pytest.approx(5.0e6, rel=0.01)
    assert m.attn_flops_per_token_pair() == pytest.approx(17.0e6, rel=0.01)
    im = _ds(chip="H200-SXM", tp=8)
    pairs = 4096 * 4096 / 2
    bf16_over_fp8 = im.flops_per_s / im.attn_flops_per_s
    assert bf16_over_fp8 == pytest.approx(1979 / 989)  # H200 datasheet fp8 / bf16 dense peaks
    assert im._attn_work(0, 4096, prefill=True) == pytest.approx(pairs * m.mha_flops_per_token_pair() * bf16_over_fp8)
    # a long cached prefix makes the multi-head form pay the up-projection: absorbed wins
    assert im._attn_work(60000, 60100, prefill=True) == pytest.approx(im._attn_work(60000, 60100, prefill=False))


def test_batch_cap_is_per_chip_so_per_chip_throughput_does_not_swing_with_tp():
    for tp in (16, 32, 64):
        assert _ds(chip="H200-SXM", tp=tp).batch_cap == MAX_BATCH_PER_CHIP * tp
    per_chip = [(_ds(chip="H200-SXM", tp=tp).max_batch(600, math.inf, 600)) / tp for tp in (16, 32, 64)]
    assert max(per_chip) < 1.3 * min(per_chip)


def test_tp_all_reduce_has_nccl_ring_latency_and_the_ring_bandwidth_term():
    # NCCL's own model (src/graph/tuning.cc, ring LL): 3.6 µs + 2(tp−1) × 0.47 µs on NVLink, plus launch;
    # bandwidth term 2(tp−1)/tp · bytes / S.
    im = InstanceModel(get_chip("H100-SXM"), 8, get_model("llama-3.1-70b"), "fp8", "bf16")
    alpha = KERNEL_LAUNCH_S + NCCL_RING_BASE_S + 14 * NCCL_NVLINK_HOP_S
    assert im.allreduce_s(0) == pytest.approx(alpha)
    n = 64e6
    assert im.allreduce_s(n) - alpha == pytest.approx(2 * 7 / 8 * n / get_chip("H100-SXM").scaleup_bytes_per_s)
    # 160 all-reduces a step at tp8 cost milliseconds, not microseconds
    assert im.comm_s(1) > 160 * 10e-6


def test_lm_head_is_paid_only_where_logits_are_sampled():
    # prefill: the LM head (hidden × vocab) once per prompt, the embedding never (a lookup)
    im = InstanceModel(get_chip("H100-SXM"), 1, get_model("llama-3.1-8b"), "fp8", "bf16")
    lm = 4096 * 128256
    elementwise = im.elementwise_s(8192) * im.flops_per_s  # norms, adds, activation (FLOP-equivalents)
    mid, _ = im.prefill_chunk_parts(16384, 0, 8192)  # not the last chunk: no logits
    per_token = 2 * (8e9 - 2 * lm) / gemm_efficiency(8192)
    assert mid - im._attn_work(0, 8192, prefill=True) - elementwise == pytest.approx(8192 * per_token)
    last, _ = im.prefill_chunk_parts(16384, 8192, 8192)
    assert last - im._attn_work(8192, 16384, prefill=True) - elementwise > 8192 * per_token


def test_small_m_gemms_run_below_the_roofline():
    # g(M) = M/(M + 32): half a 64-row wgmma tile of padding on average
    assert gemm_efficiency(32) == pytest.approx(0.5)
    assert gemm_efficiency(4096) > 0.99
    im = InstanceModel(get_chip("H100-SXM"), 1, get_model("llama-3.1-8b"), "fp8", "bf16")
    c = [im.terms("decode", b, 1024)["compute"] / b for b in (16, 64, 512)]
    assert c[0] > c[1] > c[2]  # per-token compute falls as M grows


def test_mtp_verifies_draft_positions_and_emits_accepted_tokens():
    plain = _ds(chip="H200-SXM", tp=8)
    mtp = _ds(chip="H200-SXM", tp=8, mtp_accept=1.8)
    assert mtp.draft_tokens == 1  # 1 + 1 positions verified per sequence
    assert mtp.step_s(64, 4096) > plain.step_s(64, 4096)
    # memory-bound decode: verifying a second position costs far less than a second step
    assert 64 * 1.8 / mtp.step_s(64, 4096) > 1.3 * 64 / plain.step_s(64, 4096)


def test_mixed_step_without_a_chunk_is_the_decode_step_and_a_chunk_lengthens_it(h100x2):
    """The aggregated step's TPOT interference: no chunk, no change; the longer the chunk (and
    the deeper its prefix), the longer every decoding sequence's step."""
    assert h100x2.mixed_step_s(16, 8192, 0, 0) == h100x2.step_s(16, 8192)
    steps = [h100x2.mixed_step_s(16, 8192, c, 4096) for c in (64, 512, 4096)]
    assert h100x2.step_s(16, 8192) < steps[0] < steps[1] < steps[2]
    assert h100x2.mixed_step_s(16, 8192, 512, 32768) > steps[1]


def test_max_batch_with_a_chunk_meets_tpot_with_the_chunk_in_every_step():
    im = InstanceModel(get_chip("H100-SXM"), 4, get_model("llama-3.1-70b"), "bf16", "bf16")
    plain = im.max_batch(4096, 0.05)
    mixed = im.max_batch(4096, 0.05, chunk_tokens=512, chunk_start_tokens=2048)
    assert 1 <= mixed < plain
    assert im.mixed_step_s(mixed, 4096, 512, 2048) <= 0.05
    by_memory = (mixed + 1) * 4096 > im.kv_capacity_tokens - (2048 + 512)  # room kept for the chunk's prompt
    assert by_memory or im.mixed_step_s(mixed + 1, 4096, 512, 2048) > 0.05
    assert im.max_batch(4096, 0.05, chunk_tokens=8192, chunk_start_tokens=2048) == 0  # the chunk alone is over


def test_decode_step_is_a_roofline_per_kind_of_kernel_summed():
    """LLM-Viewer's per-operator roofline (Yuan et al. 2024, arXiv 2402.16363): each operator takes
    max(FLOPs / peak, bytes / bandwidth) and the layer the sum. At a large batch the GEMMs are
    compute bound while the attention reads KV: the attention's read cannot hide under the GEMMs."""
    from placer.perfmodel import DECODE_STEP_OVERHEAD_S

    im = InstanceModel(get_chip("H200-SXM"), 1, get_model("llama-3.1-8b"), "fp8", "fp8")
    k = im.decode_kernels(899, 1, 1152)
    (lc, lm), (ac, am), (ec, em) = k["linear"], k["attention"], k["elementwise"]
    assert lc > lm and am > ac  # GEMMs compute bound, attention memory bound
    assert ec == 0 and em > 0  # norms, adds and the activation move bytes only
    assert im.step_s(899, 1152) == pytest.approx(lc + am + em + DECODE_STEP_OVERHEAD_S)
    terms = im.terms("decode", 899, 1152)  # the totals behind `bound` are the sums over the kernels
    assert terms["compute"] == pytest.approx(lc + ac) and terms["memory"] == pytest.approx(lm + am + em)
    assert im.step_s(899, 1152) > max(terms["compute"], terms["memory"]) + DECODE_STEP_OVERHEAD_S


def test_routed_expert_work_is_the_experts_share_of_the_linear_work():
    """routed_expert_work = 2 × routed params per token × tokens / (g(rows·k/E) × expert rate factor), the
    part of _linear_work that expert parallelism spreads over every chip; 0 for a dense model."""
    from placer.perfmodel import gemm_efficiency
    from placer.shapes import DEPModel

    m = get_model("deepseek-v3")
    im = DEPModel(get_chip("H200-SXM"), 8, m, "fp8", "fp8")
    rows = 16384
    expected = 2 * m.routed_expert_params_active * 1000 / (
        gemm_efficiency(rows * m.experts_per_token / m.experts) * im.expert_rate_factor)
    assert im.routed_expert_work(1000, rows) == pytest.approx(expected)
    dense_part = im._linear_work(1000, 1, rows) - im.routed_expert_work(1000, rows)
    assert 0 < dense_part < im._linear_work(1000, 1, rows)  # attention projections, shared experts, LM head
    dense = InstanceModel(get_chip("H200-SXM"), 1, get_model("llama-3.1-70b"), "fp8", "fp8")
    assert dense.routed_expert_work(1000, 8192) == 0.0


def test_prefill_memo_gives_the_computed_seconds_and_stays_bounded(monkeypatch):
    """prefill_s is memoised for the planner's repeated classes; a trace of many lengths must neither
    change a value nor grow the memo past its cap."""
    import placer.perfmodel.instance as instance  # prefill_s reads the cap where it is defined

    monkeypatch.setattr(instance, "PREFILL_MEMO_ENTRIES", 8)
    im = InstanceModel(get_chip("H100-SXM"), 1, get_model("llama-3.1-8b"), "bf16", "bf16")
    fresh = InstanceModel(get_chip("H100-SXM"), 1, get_model("llama-3.1-8b"), "bf16", "bf16")
    lengths = [512 * (i + 1) for i in range(20)]
    first = [im.prefill_s(n, 0.25) for n in lengths]
    assert [im.prefill_s(n, 0.25) for n in lengths] == first
    assert first == [fresh._prefill_uncached_s(n, 0.25) for n in lengths]
    assert len(im._prefill_memo) == 8
