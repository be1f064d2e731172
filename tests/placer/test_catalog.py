import pytest

from placer.catalog import chip_catalog, get_chip, get_model, model_catalog
from placer.errors import UnknownChipError, UnknownModelError
from placer.problem import resolve
from placer.specs import parse_scenario
from tests.placer.conftest import micro_dict

KIB = 1024


@pytest.mark.parametrize(
    ("model", "dtype", "kib"),
    [
        ("deepseek-v3.2", "fp8", 46.94),  # FlashMLA fp8 packing 656 B/layer + 132 B indexer key
        ("deepseek-v3", "bf16", 68.625),  # (512 + 64) × 2 B × 61 layers
        ("llama-3.1-70b", "bf16", 320.0),  # 80 × 2 × 8 × 128 × 2 B
        ("qwen3-235b-a22b", "bf16", 188.0),
        ("llama-3.1-8b", "bf16", 128.0),
        ("llama-3.1-8b", "fp8", 64.0),
        ("llama-2-7b", "bf16", 512.0),  # MHA: 32 × 2 × 32 × 128 × 2 B
        ("llama-3.2-1b", "bf16", 32.0),  # 16 × 2 × 8 × 64 × 2 B
    ],
)
def test_kv_bytes_per_token_matches_published_sizes(model, dtype, kib):
    assert get_model(model).kv_bytes_per_token(dtype) / KIB == pytest.approx(kib, abs=0.01)


def test_mla_is_far_smaller_than_gqa_of_similar_scale():
    assert get_model("deepseek-v3").kv_bytes_per_token("bf16") < get_model("qwen3-235b-a22b").kv_bytes_per_token("bf16") / 2


def test_catalog_holds_every_shared_chip_and_model():
    assert {"H800-SXM", "H20", "MI300X", "B200", "Ascend-910B"} <= set(chip_catalog())
    assert {"deepseek-v3.2", "kimi-k2", "llama-3.1-8b"} <= set(model_catalog())
    h20 = get_chip("H20")
    assert (h20.bf16_tflops, h20.mem_gb, h20.mem_bw_tbps) == (148, 96, 4.0)
    assert get_chip("A100-80G-SXM").fp8_tflops is None  # no fp8 tensor cores


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownChipError, match="known chips: .*H100-SXM"):
        get_chip("H9000")
    with pytest.raises(UnknownModelError, match="known models: .*llama-3.1-8b"):
        get_model("gpt-7")


def test_scenario_chip_override_keeps_base_fields_and_changes_the_rest():
    data = micro_dict(chips=[{"name": "GPU-B", "base": "H20", "price_usd_per_h": 2.5}])
    data["datacenters"][1]["inventory"] = {"GPU-B": 8}
    problem = resolve(parse_scenario(data))
    chip = problem.chips["GPU-B"]
    assert chip.price_usd_per_h == 2.5
    assert chip.mem_gb == get_chip("H20").mem_gb and chip.mem_bw_tbps == get_chip("H20").mem_bw_tbps


def test_measured_profile_replaces_default_efficiency_and_is_recorded():
    problem = resolve(parse_scenario(micro_dict()), measured={"H100-SXM": {"compute_efficiency": 0.5, "profile": "p1"}})
    assert problem.chips["H100-SXM"].compute_efficiency == 0.5
    assert any("p1" in p for p in problem.profiles_used)


def test_moe_fields_split_active_parameters_into_experts_and_the_rest():
    # DeepSeek-V3: 58 MoE layers × 8 routed experts × 3 × 7168 × 2048 ≈ 20.4 B of the 37 B active
    ds = get_model("deepseek-v3")
    assert ds.routed_expert_params_active == pytest.approx(20.4e9, rel=0.01)
    assert ds.max_nodes_per_token == 4  # node-limited routing, topk_group = 4
    assert get_model("llama-3.1-8b").routed_expert_params_active == 0


def test_lm_head_and_embedding_sizes_follow_the_vocab():
    assert get_model("llama-3.1-8b").lm_head_params == 4096 * 128256
    assert get_model("llama-3.1-8b").embedding_params == 4096 * 128256
    assert get_model("llama-3.2-1b").embedding_params == 0  # tied to the LM head
