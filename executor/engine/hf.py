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

Every JSON file comes through `placer.readers` (UTF-8, at most 64 MiB, 64 levels, no NaN, an
object at the top); every dimension is a whole number within `MAX_DIMENSIONS` and the model
within `MAX_PARAMETERS`, checked on `config.json` before anything of the model's size is
built; the shards the index names stay inside the model directory (`placer.readers.confined`).
All of it fails as a `CheckpointError`, an `InputError` (exit 2) naming the file and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.engine.config import MAX_DIMENSIONS as _MAX_BY_FIELD
from executor.engine.config import ModelConfig
from executor.engine.hf_tokenizer import HFTokenizer, TokenizerError
from placer.errors import InputError
from placer.readers import confined, load_mapping, number

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)  # buffers some older checkpoints stored
#: Largest value of each dimension of config.json (ModelConfig's bounds under their names here).
MAX_DIMENSIONS = {hf: _MAX_BY_FIELD[ours] for hf, ours in (
    ("vocab_size", "vocab_size"), ("num_hidden_layers", "num_layers"), ("hidden_size", "hidden_size"),
    ("intermediate_size", "intermediate_size"), ("num_attention_heads", "num_q_heads"),
    ("num_key_value_heads", "num_kv_heads"), ("head_dim", "head_dim"))}
#: Largest model (parameters) a config may describe: 10^12, over twice the largest dense model.
MAX_PARAMETERS = 10**12
#: Bounds of the float fields (RoPE base, its scaling factors, the RMSNorm epsilon).
MAX_ROPE_THETA = 1e12
MAX_ROPE_FACTOR = 1e6
MAX_POSITIONS = 2**24


class CheckpointError(InputError):
    """A model directory that cannot be served; the message names the file, field and value.
    An InputError (a ValueError): exit 2 at the CLI, 422 over HTTP."""


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: what an `Engine` needs, read once and shared by instances."""

    path: str
    config: ModelConfig
    weights: dict[str, Any]  # name → CPU tensor in `config.dtype`
    tokenizer: HFTokenizer


def read_json(path: Path) -> dict[str, Any]:
    """A checkpoint's JSON file (an object) through the gate, or CheckpointError."""
    if not path.is_file():
        raise CheckpointError(f"{path}: not found")
    try:
        return load_mapping(path, "checkpoint file", kind="json")
    except InputError as exc:
        raise CheckpointError(str(exc)) from None


def _dimension(raw: dict[str, Any], key: str, path: Path, default: Any = None) -> int:
    """Whole number ``raw[key]`` in [1, MAX_DIMENSIONS[key]] (``default`` when absent or null)."""
    value = raw.get(key)
    if value is None:
        if default is None:
            raise CheckpointError(f"{path}: missing {key!r}")
        value = default
    try:
        return number(value, f"{path}: {key}", lo=1, hi=MAX_DIMENSIONS[key], integer=True)
    except InputError as exc:
        raise CheckpointError(str(exc)) from None


def _real(value: Any, where: str, lo: float, hi: float) -> float:
    try:
        return float(number(value, where, lo=lo, hi=hi))
    except InputError as exc:
        raise CheckpointError(str(exc)) from None


def _flag(raw: dict[str, Any], key: str, default: bool, path: Path) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise CheckpointError(f"{path}: {key} must be true or false, got {value!r}")
    return value


def _parameters(vocab: int, layers: int, hidden: int, q_dim: int, kv_dim: int, ffn: int, tied: bool) -> int:
    """Weights a config describes (embeddings, attention, MLP; norms and biases are noise)."""
    return vocab * hidden * (1 if tied else 2) + layers * (hidden * (2 * q_dim + 2 * kv_dim) + 3 * hidden * ffn)


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
    dims = {key: _dimension(raw, key, path) for key in ("vocab_size", "num_hidden_layers", "hidden_size",
                                                          "intermediate_size", "num_attention_heads")}
    heads, hidden = dims["num_attention_heads"], dims["hidden_size"]
    kv_heads = _dimension(raw, "num_key_value_heads", path, default=heads) if raw.get("num_key_value_heads") \
        else heads
    head_dim = _dimension(raw, "head_dim", path) if raw.get("head_dim") else max(1, hidden // heads)
    tied = _flag(raw, "tie_word_embeddings", False, path)
    params = _parameters(dims["vocab_size"], dims["num_hidden_layers"], hidden, heads * head_dim,
                         kv_heads * head_dim, dims["intermediate_size"], tied)
    if params > MAX_PARAMETERS:
        raise CheckpointError(f"{path}: the dimensions describe {params:.3g} parameters, more than the "
                              f"{MAX_PARAMETERS:.0e} a served model may have")
    eps = _real(raw.get("rms_norm_eps", 1e-6), f"{path}: rms_norm_eps", 0.0, 1.0)
    rope = _rope_fields(raw, path)
    try:
        return ModelConfig(
            vocab_size=dims["vocab_size"], num_layers=dims["num_hidden_layers"], hidden_size=hidden,
            num_q_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
            intermediate_size=dims["intermediate_size"], rms_norm_eps=eps,
            dtype=dtype, attention_bias=_flag(raw, "attention_bias", family == "qwen2", path),
            qk_norm=family == "qwen3", tie_word_embeddings=tied, **rope,
        )
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def _rope_fields(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The RoPE settings of a config: `rope_parameters` (new) or `rope_theta` + `rope_scaling` (old)."""
    key = "rope_parameters" if raw.get("rope_parameters") else "rope_scaling"
    params = raw.get(key) or {}
    if not isinstance(params, dict):
        raise CheckpointError(f"{path}: {key} must be an object, got {params!r}")
    rope_type = params.get("rope_type", params.get("type", "default"))
    theta = params.get("rope_theta", raw.get("rope_theta", 10000.0))
    out: dict[str, Any] = {"rope_theta": _real(theta, f"{path}: rope_theta", 1.0, MAX_ROPE_THETA),
                           "rope_type": rope_type}
    if rope_type == "default":
        return out
    if not isinstance(rope_type, str) or rope_type not in ("linear", "llama3"):
        raise CheckpointError(f"{path}: rope_type {rope_type!r} is not served (default, linear, llama3)")
    def factor(name: str, default: float) -> float:
        return _real(params.get(name, default), f"{path}: {key}.{name}", 0.0, MAX_ROPE_FACTOR)

    out["rope_factor"] = factor("factor", 1.0)
    if rope_type == "llama3":
        positions = params.get("original_max_position_embeddings", 8192)
        out |= {"rope_low_freq_factor": factor("low_freq_factor", 1.0),
                "rope_high_freq_factor": factor("high_freq_factor", 4.0),
                "rope_original_max_positions": int(_real(positions, f"{path}: {key}.original_max_position_embeddings",
                                                         1, MAX_POSITIONS))}
    return out


def shard_files(model_dir: str | Path) -> list[Path]:
    """The safetensors files holding the weights: those the index names, else every *.safetensors."""
    root = Path(model_dir)
    index = root / INDEX_FILE
    if index.exists():
        weight_map = read_json(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: no weight_map (an object of tensor name → shard file)")
        names = set()
        for tensor, name in weight_map.items():
            try:  # decided on the name, before the file system is asked: the same error whether it exists or not
                names.add(str(confined(root, name, f"{index}: weight_map[{tensor!r}]", "model directory")))
            except InputError as exc:
                raise CheckpointError(str(exc)) from None
        files = [Path(name) for name in sorted(names)]
        missing = [str(f) for f in files if not f.is_file()]
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
    family = read_json(root / CONFIG_FILE)["model_type"]  # model_config checked it
    chat = "chat template" if tokenizer.chat_template else "no chat template"
    return (f"{root} ({family}: {c.num_layers} layers, hidden {c.hidden_size}, {c.num_q_heads}/{c.num_kv_heads} "
            f"q/kv heads of {c.head_dim}, vocab {c.vocab_size}, rope {c.rope_type}; {len(shards)} shard(s), "
            f"{tokenizer.vocab_size}-token tokenizer, {chat})")
