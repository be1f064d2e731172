"""Tiny random Hugging Face checkpoints of each served family, built locally (nothing downloaded).

`tiny_checkpoints(tmp_path_factory)` writes, once per test session, one directory per family
under the session's temp dir — `save_pretrained` of a `transformers` model (sharded, with an
index file) and a tokenizer trained here with `tokenizers` (BPE over a few sentences) plus a
`tokenizer_config.json` with a chat template — and returns {family: directory}.

Weights are drawn as the engine's own seeded init (N(0, 1/fan_in), a wide LM head) rather
than transformers' N(0, 0.02): with near-uniform logits a greedy comparison would test
rounding, not the model. Norm weights and biases are perturbed so that applying them
(or not) changes the output.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from executor.engine import ModelConfig
from executor.engine.model import init_weights

FAMILIES = ("llama3", "qwen2", "qwen3")
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a relay decoder streams tokens while the main decoder waits for its cache",
    "prefill reads the whole prompt at once, decode emits one token at a time",
    "hello world, hello placer: plans that deploy onto real engines",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
VOCAB_SIZE = 160  # the model's rows; the tokenizer uses fewer (as real checkpoints pad their vocab)
SPECIALS = ["<bos>", "<eos>", "<|im_start|>", "<|im_end|>"]


def _hf_config(family: str):
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    common = dict(vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6, bos_token_id=0,
                  eos_token_id=1, max_position_embeddings=512)
    if family == "llama3":  # Llama-3's band-wise rope scaling, untied head
        return LlamaConfig(**common, rope_theta=500000.0, tie_word_embeddings=False, rope_scaling={
            "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32})
    if family == "qwen2":  # q/k/v biases, tied embeddings
        return Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=True)
    if family == "qwen3":  # per-head q/k norm, head_dim independent of hidden / heads
        return Qwen3Config(**common, head_dim=32, rope_theta=1000000.0, tie_word_embeddings=False)
    raise ValueError(family)


def _train_tokenizer(family: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=SPECIALS)
    tok.train_from_iterator(CORPUS, trainer)
    if family == "llama3":  # Llama-3 adds BOS in the post-processor; Qwen adds nothing
        tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    return tok


def _weights(family: str, hf_model, seed: int) -> dict[str, torch.Tensor]:
    c = hf_model.config
    mc = ModelConfig(vocab_size=c.vocab_size, num_layers=c.num_hidden_layers, hidden_size=c.hidden_size,
                     num_q_heads=c.num_attention_heads, num_kv_heads=c.num_key_value_heads,
                     head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
                     intermediate_size=c.intermediate_size, attention_bias=family == "qwen2",
                     qk_norm=family == "qwen3", tie_word_embeddings=c.tie_word_embeddings)
    gen = torch.Generator().manual_seed(seed + 1)
    weights = init_weights(mc, seed)
    for name, w in weights.items():
        if name.endswith("norm.weight"):
            weights[name] = w + 0.2 * torch.randn(w.shape, generator=gen)
    # a small embedding keeps the residual stream from simply predicting the current token again
    weights["model.embed_tokens.weight"] *= 0.2
    return weights


def build_checkpoint(family: str, out: Path, seed: int = 0) -> Path:
    """One tiny checkpoint of `family` in `out` (sharded safetensors + index, tokenizer files)."""
    from transformers import AutoModelForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_hf_config(family))
    missing, unexpected = model.load_state_dict(_weights(family, model, seed), strict=False)
    leftover = [m for m in missing if not (m == "lm_head.weight" and model.config.tie_word_embeddings)]
    if leftover or unexpected:
        raise RuntimeError(f"{family}: weights do not match the transformers model: {leftover} {unexpected}")
    model.save_pretrained(out, max_shard_size="100KB")
    _train_tokenizer(family).save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
        "chat_template": CHAT_TEMPLATE}))
    return out


def tiny_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """{family: directory}, built once per session under its base temp dir (skips without the dev extra)."""
    import pytest

    pytest.importorskip("transformers", reason="the checkpoint tests need the dev extra (transformers)")
    pytest.importorskip("tokenizers", reason="the checkpoint tests need tokenizers")
    root = tmp_path_factory.getbasetemp() / "hf-checkpoints"
    dirs = {f: root / f for f in FAMILIES}
    for family, path in dirs.items():
        if not (path / "config.json").exists():
            build_checkpoint(family, path)
    return dirs


def hf_greedy(model_dir: Path, prompt: list[int], max_new_tokens: int, stop_at_eos: bool = True) -> list[int]:
    """transformers' greedy `generate` (float32, CPU) on the checkpoint: the reference output tokens
    (through EOS, or exactly `max_new_tokens` with `stop_at_eos=False`)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    if not stop_at_eos:
        model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens, do_sample=False,
                             eos_token_id=1 if stop_at_eos else None, pad_token_id=1)
    return out[0, len(prompt):].tolist()
