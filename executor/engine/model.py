"""A small Llama-architecture transformer: weights (seeded or safetensors) and its forward.

In: a `ModelConfig`, weights (a name → tensor dict, Hugging Face Llama names), an ops
backend (`placer_kernels.get_ops`), and per forward the new tokens, their positions and an
attention callback. Out: final hidden states and logits.

The model is pure math: it owns no KV cache and knows nothing of blocks or batches.
The runner passes `attend(layer, q, k, v)`, which stores the new K/V in its paged
cache and calls the right attention kernel for the batch kind.

Layer: x += o_proj(attn(rope(qn(q_proj(n1))), rope(kn(k_proj(n1))), v_proj(n1))) with
n1 = rms_norm(x); x += down(silu(gate(n2)) * up(n2)) with n2 = rms_norm(x). The
family variants (`ModelConfig`): q/k/v projections with biases (Qwen2), qn/kn =
per-head RMSNorm (Qwen3; identity otherwise), the LM head tied to the embedding,
and scaled RoPE frequencies — default RoPE runs the backend's kernel, scaled RoPE
the same rotation in torch over the scaled inverse frequencies (`rope_inv_freq`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

from executor.engine.config import ModelConfig
from placer.readers import parse_data

WEIGHTS_FORMAT = "placer-llama"

AttendFn = Callable[[int, Tensor, Tensor, Tensor], Tensor]


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a `ModelConfig.dtype` name."""
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def weight_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every weight's name and shape (Hugging Face Llama / Qwen naming)."""
    c = config
    h, q_dim, kv_dim = c.hidden_size, c.num_q_heads * c.head_dim, c.num_kv_heads * c.head_dim
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (c.vocab_size, h)}
    for i in range(c.num_layers):
        p = f"model.layers.{i}."
        if c.attention_bias:
            shapes |= {p + "self_attn.q_proj.bias": (q_dim,), p + "self_attn.k_proj.bias": (kv_dim,),
                       p + "self_attn.v_proj.bias": (kv_dim,)}
        if c.qk_norm:
            shapes |= {p + "self_attn.q_norm.weight": (c.head_dim,), p + "self_attn.k_norm.weight": (c.head_dim,)}
        shapes |= {
            p + "input_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (q_dim, h),
            p + "self_attn.k_proj.weight": (kv_dim, h),
            p + "self_attn.v_proj.weight": (kv_dim, h),
            p + "self_attn.o_proj.weight": (h, q_dim),
            p + "post_attention_layernorm.weight": (h,),
            p + "mlp.gate_proj.weight": (c.intermediate_size, h),
            p + "mlp.up_proj.weight": (c.intermediate_size, h),
            p + "mlp.down_proj.weight": (h, c.intermediate_size),
        }
    shapes |= {"model.norm.weight": (h,)}
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, h)
    return shapes


def rope_inv_freq(config: ModelConfig) -> Tensor:
    """fp32 inverse frequencies [head_dim/2] of the config's RoPE, scaling applied (as HF computes them)."""
    c = config
    inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.int64).float() / c.head_dim))
    if c.rope_type == "linear":
        return inv / c.rope_factor
    if c.rope_type == "llama3":
        low_wavelen = c.rope_original_max_positions / c.rope_low_freq_factor
        high_wavelen = c.rope_original_max_positions / c.rope_high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / c.rope_factor, inv)
        smooth = (c.rope_original_max_positions / wavelen - c.rope_low_freq_factor) / (
            c.rope_high_freq_factor - c.rope_low_freq_factor)
        blended = (1 - smooth) * scaled / c.rope_factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, blended, scaled)
    return inv


def _rope_torch(x: Tensor, positions: Tensor, inv_freq: Tensor) -> Tensor:
    """Rotate-half RoPE of x [T, H, D] at `positions` with the given inverse frequencies."""
    angles = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat([angles, angles], dim=-1)[:, None, :]
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def init_weights(config: ModelConfig, seed: int) -> dict[str, Tensor]:
    """Deterministic random weights (CPU, `config.dtype`) from `seed`.

    Projections are N(0, 1/fan_in) so activations keep unit scale; the LM head is
    scaled so logits spread over a few units, which makes greedy decoding of the
    random model wander over many tokens instead of repeating one.
    """
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in weight_shapes(config).items():
        if name.endswith("norm.weight"):
            w = torch.ones(shape)
        elif name.endswith(".bias"):
            w = torch.randn(shape, generator=gen) * 0.1
        elif name == "model.embed_tokens.weight":
            w = torch.randn(shape, generator=gen)
        else:
            std = (4.0 if name == "lm_head.weight" else 1.0) / math.sqrt(shape[1])
            w = torch.randn(shape, generator=gen) * std
        out[name] = w.to(torch_dtype(config.dtype))
    return out


def save_weights(path: str | Path, config: ModelConfig, weights: dict[str, Tensor]) -> None:
    """Write weights and their config to one safetensors file."""
    check_weights(config, weights)
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in weights.items()}
    metadata = {"format": WEIGHTS_FORMAT, "config": json.dumps(config.to_dict())}
    save_file(tensors, str(path), metadata=metadata)


def load_weights(path: str | Path) -> tuple[ModelConfig, dict[str, Tensor]]:
    """Read a file written by `save_weights`: its config and CPU weights."""
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
        if metadata.get("format") != WEIGHTS_FORMAT or "config" not in metadata:
            raise ValueError(
                f"{path}: not a placer weights file (metadata format "
                f"{metadata.get('format')!r}, expected {WEIGHTS_FORMAT!r} with a config)"
            )
        raw = parse_data(metadata["config"], "json", f"{path}: metadata config")  # the gate: depth, no NaN
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: metadata config must be an object")
        config = ModelConfig.from_dict(raw)
        weights = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open API)
    check_weights(config, weights)
    return config, weights


def check_weights(config: ModelConfig, weights: dict[str, Tensor]) -> None:
    """ValueError naming what is missing, unexpected or of the wrong shape."""
    expected = weight_shapes(config)
    missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or extra:
        raise ValueError(f"weights do not match the config: missing {missing}, unexpected {extra}")
    for name, shape in expected.items():
        if tuple(weights[name].shape) != shape:
            raise ValueError(f"weight {name} has shape {tuple(weights[name].shape)}, expected {shape}")


class LlamaModel:
    """The forward pass over packed new tokens, with attention delegated to the caller."""

    def __init__(self, config: ModelConfig, weights: dict[str, Tensor], ops, device) -> None:
        check_weights(config, weights)
        self.config = config
        self.ops = ops
        self.device = torch.device(device)
        self.dtype = torch_dtype(config.dtype)
        w = {k: v.to(device=self.device, dtype=self.dtype).contiguous() for k, v in weights.items()}
        self.weights = w  # by name, on the device (what `save_weights` writes)
        self.embed = w["model.embed_tokens.weight"]
        self.final_norm = w["model.norm.weight"]
        self.lm_head = w["model.embed_tokens.weight" if config.tie_word_embeddings else "lm_head.weight"]
        self.layers = [_layer_weights(w, f"model.layers.{i}.") for i in range(config.num_layers)]
        # scaled RoPE runs in torch over these frequencies; default RoPE uses the backend's kernel
        self.inv_freq = None if config.rope_type == "default" else rope_inv_freq(config).to(self.device)

    @torch.no_grad()
    def forward(self, input_ids: Tensor, positions: Tensor, attend: AttendFn) -> Tensor:
        """Final-normed hidden states [T, hidden] of the packed new tokens."""
        c, ops = self.config, self.ops
        t = input_ids.shape[0]
        x = self.embed[input_ids]
        for i, lw in enumerate(self.layers):
            n = ops.rms_norm(x, lw["attn_norm"], c.rms_norm_eps)
            q = _project(n, lw, "q").view(t, c.num_q_heads, c.head_dim)
            k = _project(n, lw, "k").view(t, c.num_kv_heads, c.head_dim)
            v = _project(n, lw, "v").view(t, c.num_kv_heads, c.head_dim).contiguous()
            if c.qk_norm:
                q = ops.rms_norm(q.reshape(-1, c.head_dim), lw["q_norm"], c.rms_norm_eps).view(q.shape)
                k = ops.rms_norm(k.reshape(-1, c.head_dim), lw["k_norm"], c.rms_norm_eps).view(k.shape)
            q, k = self._rope(q, k, positions)
            o = attend(i, q.contiguous(), k.contiguous(), v)
            x = x + o.reshape(t, -1) @ lw["o"].T
            n = ops.rms_norm(x, lw["mlp_norm"], c.rms_norm_eps)
            x = x + (torch.nn.functional.silu(n @ lw["gate"].T) * (n @ lw["up"].T)) @ lw["down"].T
        return ops.rms_norm(x, self.final_norm, c.rms_norm_eps)

    def _rope(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        if self.inv_freq is None:
            return self.ops.apply_rope(q.contiguous(), k.contiguous(), positions, self.config.rope_theta)
        return _rope_torch(q, positions, self.inv_freq), _rope_torch(k, positions, self.inv_freq)

    @torch.no_grad()
    def logits(self, hidden: Tensor) -> Tensor:
        """fp32 logits [N, vocab] for hidden states [N, hidden]."""
        return (hidden @ self.lm_head.T).float()


_LAYER_TENSORS = (
    ("attn_norm", "input_layernorm.weight"), ("q", "self_attn.q_proj.weight"), ("k", "self_attn.k_proj.weight"),
    ("v", "self_attn.v_proj.weight"), ("o", "self_attn.o_proj.weight"),
    ("mlp_norm", "post_attention_layernorm.weight"), ("gate", "mlp.gate_proj.weight"),
    ("up", "mlp.up_proj.weight"), ("down", "mlp.down_proj.weight"),
    ("q_bias", "self_attn.q_proj.bias"), ("k_bias", "self_attn.k_proj.bias"), ("v_bias", "self_attn.v_proj.bias"),
    ("q_norm", "self_attn.q_norm.weight"), ("k_norm", "self_attn.k_norm.weight"),
)


def _layer_weights(w: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    """One layer's tensors by short key (optional ones only where the checkpoint has them)."""
    return {key: w[prefix + name] for key, name in _LAYER_TENSORS if prefix + name in w}


def _project(x: Tensor, lw: dict[str, Tensor], which: str) -> Tensor:
    out = x @ lw[which].T
    bias = lw.get(which + "_bias")
    return out if bias is None else out + bias
