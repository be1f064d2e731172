"""Model weights (seeded, safetensors), config validation, tokenizer."""

import pytest
import torch

from executor.engine import ByteTokenizer, Engine, EngineConfig, ModelConfig, SamplingParams
from executor.engine.model import init_weights, load_weights, save_weights

NO_EOS = SamplingParams(max_new_tokens=64, stop_at_eos=False)


def test_saved_weights_reload_to_identical_outputs(make_engine, prompt, tmp_path):
    engine = make_engine()
    path = tmp_path / "tiny.safetensors"
    engine.save(path)
    loaded = Engine.from_file(path, EngineConfig(backend="torch", block_size=4), device="cpu")
    assert loaded.model_config == engine.model_config
    assert loaded.generate(prompt, 16, NO_EOS) == engine.generate(prompt, 16, NO_EOS)
    a, b = engine.prefill(prompt, NO_EOS), loaded.prefill(prompt, NO_EOS)
    assert torch.equal(engine.export_kv(a.request, 0, 23).k, loaded.export_kv(b.request, 0, 23).k)


def test_loading_a_foreign_or_mismatched_file_fails_clearly(model_config, tmp_path):
    from safetensors.torch import save_file

    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign))
    with pytest.raises(ValueError, match="not a placer weights file"):
        load_weights(foreign)
    weights = init_weights(model_config, seed=0)
    weights.pop("lm_head.weight")
    with pytest.raises(ValueError, match=r"missing \['lm_head.weight'\]"):
        save_weights(tmp_path / "x.safetensors", model_config, weights)


def test_same_seed_same_model_other_seed_other_model(model_config, prompt):
    a, b, c = (init_weights(model_config, seed=s) for s in (3, 3, 4))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["lm_head.weight"], c["lm_head.weight"])


def test_greedy_decoding_of_a_seeded_model_is_varied(make_engine, prompt):
    out = make_engine().generate(prompt, 32, NO_EOS)
    assert len(out) == 32
    assert len(set(out)) >= 10  # not one token repeated


def test_temperature_sampling_is_reproducible_per_seed(make_engine, prompt):
    engine = make_engine()
    hot = [engine.generate(prompt, 16, SamplingParams(temperature=1.5, seed=s, stop_at_eos=False)) for s in (1, 1, 2)]
    assert hot[0] == hot[1]
    assert hot[0] != hot[2]
    assert hot[0] != engine.generate(prompt, 16, NO_EOS)


def test_bfloat16_model_runs_and_stores_bfloat16_kv(model_config, prompt):
    cfg = ModelConfig(**{**model_config.to_dict(), "dtype": "bfloat16"})
    engine = Engine.from_seed(cfg, EngineConfig(backend="torch", block_size=4), seed=0, device="cpu")
    pre = engine.prefill(prompt, NO_EOS)
    assert engine.export_kv(pre.request, 0, 4).k.dtype == torch.bfloat16
    assert cfg.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_q_heads": 6, "num_kv_heads": 4}, "num_q_heads \\(6\\) must be a multiple of num_kv_heads \\(4\\)"),
        ({"head_dim": 15}, "head_dim must be even"),
        ({"hidden_size": 0}, "hidden_size must be a positive int, got 0"),
        ({"dtype": "int8"}, "dtype must be one of"),
    ],
)
def test_bad_model_config_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


def test_bad_engine_config_names_the_field():
    with pytest.raises(ValueError, match="backend must be one of"):
        EngineConfig(backend="cuda")
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        EngineConfig(backend="torch", block_size=0)


def test_tokenizer_round_trips_utf8_and_marks_bos():
    tok = ByteTokenizer()
    ids = tok.encode("héllo, 世界")
    assert ids[0] == tok.bos_id and all(0 <= i < 256 for i in ids[1:])
    assert tok.decode([*ids, tok.eos_id]) == "héllo, 世界"
    assert tok.decode(ids[:3]) == "h\ufffd"  # a cut multi-byte character is replaced, not an error
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([999])


def test_out_of_vocabulary_prompt_is_rejected(make_engine):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        make_engine().prefill([1, 2, 300])
