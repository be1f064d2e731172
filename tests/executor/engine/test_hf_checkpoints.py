"""Hugging Face checkpoints in the engine: loading, the tokenizer, and parity with transformers.

Parity: greedy output of the engine (torch backend, float32, CPU) is token-identical to
`transformers`' `generate` on tiny random checkpoints of each family, and the prompt's logits
agree within 1e-4 — with each family's variant (rope scaling, q/k/v bias, q/k norm, tied
head) shown to matter by switching it off.
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from executor.engine import Engine, EngineConfig
from executor.engine.hf import CheckpointError, load_checkpoint
from executor.engine.request import Request, SamplingParams
from executor.engine.runner import SeqInput
from executor.engine.scheduler import BatchKind
from tests.executor.engine.hf_support import CORPUS, FAMILIES, hf_greedy

ENGINE = EngineConfig(backend="torch", block_size=4, num_blocks=128)
PROMPTS = ["the quick brown fox", "a relay decoder streams tokens while the main"]


def _engine(model_dir) -> Engine:
    return Engine.from_pretrained(model_dir, ENGINE, device="cpu")


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_output_is_token_identical_to_transformers_generate(hf_checkpoints, family):
    engine = _engine(hf_checkpoints[family])
    for text in PROMPTS:
        prompt = engine.tokenizer.encode(text)
        assert engine.generate(prompt, 16) == hf_greedy(hf_checkpoints[family], prompt, 16)


def _hf_logits(model_dir, prompt):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([prompt])).logits[0]


def _engine_logits(checkpoint, prompt):
    """The engine's logits [T, vocab] of every prompt token (one PREFILL forward)."""
    engine = Engine.from_checkpoint(checkpoint, ENGINE, device="cpu")
    blocks = tuple(range(-(-len(prompt) // ENGINE.block_size)))
    return engine.runner.forward(BatchKind.PREFILL, [SeqInput(tuple(prompt), 0, blocks)], all_logits=True)


@pytest.mark.parametrize(("family", "variant"), [
    ("llama3", {"rope_type": "default"}), ("qwen2", {"attention_bias": False}), ("qwen3", {"qk_norm": False})])
def test_prompt_logits_match_transformers_and_the_family_variant_matters(hf_checkpoints, family, variant):
    ckpt = load_checkpoint(hf_checkpoints[family])
    prompt = ckpt.tokenizer.encode(CORPUS[1])
    ref = _hf_logits(hf_checkpoints[family], prompt)
    torch.testing.assert_close(_engine_logits(ckpt, prompt), ref, atol=1e-4, rtol=1e-4)
    weights = {k: v for k, v in ckpt.weights.items() if "bias" not in k and "q_norm" not in k and "k_norm" not in k}
    plain = dataclasses.replace(ckpt, config=dataclasses.replace(ckpt.config, **variant), weights=weights)
    assert not torch.allclose(_engine_logits(plain, prompt), ref, atol=1e-2)


@pytest.mark.parametrize("family", FAMILIES)
def test_tokenizer_and_chat_template_match_transformers(hf_checkpoints, family):
    from transformers import AutoTokenizer

    ours = load_checkpoint(hf_checkpoints[family]).tokenizer
    ref = AutoTokenizer.from_pretrained(hf_checkpoints[family])
    for text in CORPUS:
        assert ours.encode(text) == ref(text)["input_ids"]
        assert ours.decode(ours.encode(text)) == ref.decode(ref(text)["input_ids"], skip_special_tokens=True)
    chat = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "the quick fox"},
            {"role": "user", "content": "hello placer"}]
    assert ours.render_chat(chat) == ref.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert ours.encode_chat(chat) == list(ref.apply_chat_template(chat, add_generation_prompt=True,
                                                                  return_dict=True)["input_ids"])
    assert ours.eos_ids == (1,)


def test_a_request_stops_at_any_of_the_checkpoints_eos_ids():
    req = Request([5, 6], 2, SamplingParams(max_new_tokens=8), eos_token_id=1, extra_eos_token_ids=(3,))
    req.token_ids.append(3)
    assert req.reached_stop() and req.ended_at_eos()


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: (d / "config.json").unlink(), "config.json"),
    (lambda d: _edit_config(d, model_type="gpt2"), "model_type 'gpt2'"),
    (lambda d: _edit_config(d, use_sliding_window=True, sliding_window=64), "sliding_window 64"),
    (lambda d: _edit_config(d, rope_parameters={"rope_type": "yarn", "factor": 2.0}), "rope_type 'yarn'"),
    (lambda d: _edit_config(d, hidden_act="gelu"), "hidden_act 'gelu'"),
    (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json"),
    (lambda d: _edit_config(d, num_hidden_layers=3), "model.layers.2"),
])
def test_a_directory_that_cannot_be_served_is_refused_naming_what(hf_checkpoints, tmp_path, edit, named):
    model_dir = _copy(hf_checkpoints["qwen2"], tmp_path / "m")
    edit(model_dir)
    with pytest.raises(CheckpointError, match=named.replace("(", r"\(")):
        load_checkpoint(model_dir)


def _edit_config(model_dir, **changes):
    path = model_dir / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def test_bfloat16_serving_casts_the_weights(hf_checkpoints):
    engine = Engine.from_pretrained(hf_checkpoints["qwen3"], ENGINE, device="cpu", dtype="bfloat16")
    assert engine.model.embed.dtype == torch.bfloat16
    assert len(engine.generate(engine.tokenizer.encode(PROMPTS[0]), 4)) == 4
