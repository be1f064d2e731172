import math

import pytest

from placer.catalog import get_chip, get_model
from placer.perfmodel import InstanceModel, WaitModel, wan_transfer_s


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
