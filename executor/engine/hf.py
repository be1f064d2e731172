"""Hugging Face-format checkpoints from a local directory: config, safetensors shards, tokenizer.

In: a directory as `save_pretrained` writes it — `config.json`, `model.safetensors` or
shards with `model.safetensors.index.json`, `tokenizer.json` (+ `tokenizer_config.json`,
`generation_config.json`, `chat_template.jinja`). Out: a `Checkpoint` (a `ModelConfig`,
CPU weights under the engine's names, and an `HFTokenizer`). Nothing is downloaded.

Families (`model_type`): `llama` (Llama 2/3, rope scaling "linear"/"llama3"), `qwen2`
(biases on q/k/v), `qwen3` (per-head q/k RMSNorm), dense only; `mistral` reads as llama
when it has no sliding window. Rules: `hidden_act` must be silu; a sliding window, MoE
or an unknown rope type is refused with a `CheckpointError` naming the field and value;
the LM head is the embedding when `tie_word_embeddings` (a stored `lm_head.weight` is
then ignored); RoPE settings come from `rope_parameters` (transformers ≥ 5) or
`rope_theta` + `rope_scaling` (older files). Weights are cast to the requested dtype.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.engine.config import ModelConfig
from executor.engine.hf_tokenizer import HFTokenizer, TokenizerError

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)  # buffers some older checkpoints stored


class CheckpointError(ValueError):
    """A model directory that cannot be served; the message names the file, field and value."""


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: what an `Engine` needs, read once and shared by instances."""

    path: str
    config: ModelConfig
    weights: dict[str, Any]  # name → CPU tensor in `config.dtype`
    tokenizer: HFTokenizer


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from None


def model_config(model_dir: str | Path, dtype: str = "float32") -> ModelConfig:
    """`config.json` → `ModelConfig` (CheckpointError for a family or feature we do not serve)."""
    path = Path(model_dir) / CONFIG_FILE
    raw = read_json(path)

    def need(key: str) -> Any:
        if key not in raw:
            raise CheckpointError(f"{path}: missing {key!r}")
        return raw[key]

    family = raw.get("model_type")
    if family not in FAMILIES:
        raise CheckpointError(f"{path}: model_type {family!r} is not served; dense families: {', '.join(FAMILIES)}")
    if raw.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{path}: hidden_act {raw['hidden_act']!r} is not served (silu only)")
    if raw.get("use_sliding_window") or (family == "mistral" and raw.get("sliding_window")):
        raise CheckpointError(f"{path}: sliding-window attention (sliding_window {raw.get('sliding_window')!r}) "
                              "is not served")
    heads = need("num_attention_heads")
    rope = _rope_fields(raw, path)
    try:
        return ModelConfig(
            vocab_size=need("vocab_size"), num_layers=need("num_hidden_layers"), hidden_size=need("hidden_size"),
            num_q_heads=heads, num_kv_heads=raw.get("num_key_value_heads") or heads,
            head_dim=raw.get("head_dim") or need("hidden_size") // heads,
            intermediate_size=need("intermediate_size"), rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            dtype=dtype, attention_bias=bool(raw.get("attention_bias", family == "qwen2")),
            qk_norm=family == "qwen3", tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)), **rope,
        )
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def _rope_fields(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The RoPE settings of a config: `rope_parameters` (new) or `rope_theta` + `rope_scaling` (old)."""
    params = dict(raw.get("rope_parameters") or raw.get("rope_scaling") or {})
    rope_type = params.get("rope_type", params.get("type", "default"))
    theta = params.get("rope_theta", raw.get("rope_theta", 10000.0))
    out: dict[str, Any] = {"rope_theta": float(theta), "rope_type": rope_type}
    if rope_type == "default":
        return out
    if rope_type not in ("linear", "llama3"):
        raise CheckpointError(f"{path}: rope_type {rope_type!r} is not served (default, linear, llama3)")
    out["rope_factor"] = float(params.get("factor", 1.0))
    if rope_type == "llama3":
        out |= {"rope_low_freq_factor": float(params.get("low_freq_factor", 1.0)),
                "rope_high_freq_factor": float(params.get("high_freq_factor", 4.0)),
                "rope_original_max_positions": int(params.get("original_max_position_embeddings", 8192))}
    return out


def shard_files(model_dir: str | Path) -> list[Path]:
    """The safetensors files holding the weights: those the index names, else every *.safetensors."""
    root = Path(model_dir)
    index = root / INDEX_FILE
    if index.exists():
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: no weight_map")
        files = [root / name for name in sorted(set(weight_map.values()))]
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise CheckpointError(f"{index}: names shards that are not there: {missing}")
        return files
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{root}: no *.safetensors weights")
    return files


def load_weights(model_dir: str | Path, config: ModelConfig) -> dict[str, Any]:
    """Every tensor the config needs, from the shards, on the CPU in `config.dtype`."""
    import torch
    from safetensors import safe_open

    from executor.engine.model import check_weights, torch_dtype, weight_shapes

    wanted = set(weight_shapes(config))
    dtype = torch_dtype(config.dtype)
    weights: dict[str, torch.Tensor] = {}
    unexpected = []
    for file in shard_files(model_dir):
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open API)
                if name in wanted:
                    weights[name] = f.get_tensor(name).to(dtype)
                elif not (name.endswith(IGNORED_SUFFIXES) or (name == "lm_head.weight" and config.tie_word_embeddings)):
                    unexpected.append(name)
    if unexpected:
        raise CheckpointError(f"{model_dir}: tensors this architecture does not use: {sorted(unexpected)[:8]}")
    try:
        check_weights(config, weights)
    except ValueError as exc:
        raise CheckpointError(f"{model_dir}: {exc}") from None
    return weights


def load_checkpoint(model_dir: str | Path, dtype: str = "float32") -> Checkpoint:
    """Config, weights and tokenizer of a local Hugging Face-format directory."""
    root = Path(model_dir)
    if not root.is_dir():
        raise CheckpointError(f"model directory {str(root)!r} does not exist")
    config = model_config(root, dtype)
    try:
        tokenizer = HFTokenizer.from_dir(root)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from None
    if tokenizer.vocab_size > config.vocab_size:
        raise CheckpointError(f"{root}: the tokenizer has {tokenizer.vocab_size} tokens but the model's "
                              f"vocab_size is {config.vocab_size}")
    return Checkpoint(str(root), config, load_weights(root, config), tokenizer)


def describe_model_dir(model_dir: str | Path) -> str:
    """Check a directory without reading its weights (config, tokenizer, shards) → one line for `--dry-run`."""
    root = Path(model_dir)
    if not root.is_dir():
        raise CheckpointError(f"--model-dir {str(root)!r} is not a directory")
    c = model_config(root)
    try:
        tokenizer = HFTokenizer.from_dir(root)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from None
    shards = shard_files(root)
    family = read_json(root / CONFIG_FILE)["model_type"]
    chat = "chat template" if tokenizer.chat_template else "no chat template"
    return (f"{root} ({family}: {c.num_layers} layers, hidden {c.hidden_size}, {c.num_q_heads}/{c.num_kv_heads} "
            f"q/kv heads of {c.head_dim}, vocab {c.vocab_size}, rope {c.rope_type}; {len(shards)} shard(s), "
            f"{tokenizer.vocab_size}-token tokenizer, {chat})")
