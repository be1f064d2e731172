"""Model and engine settings: frozen dataclasses, validated once at construction.

In: plain values (or a dict, e.g. from a safetensors header). Out: `ModelConfig`
(the architecture of a small Llama-style model) and `EngineConfig` (KV pool size,
block size, ops backend, batching limits). No torch here: dtypes are names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
BACKENDS = ("torch", "triton")
#: RoPE frequency schemes: plain, "linear" (positions / factor) and Llama-3's band-wise scaling
ROPE_TYPES = ("default", "linear", "llama3")
#: Largest value of each dimension: several times the largest dense model served today
#: (Llama-3.1-405B: 126 layers, hidden 16384, 128 heads; Gemma's vocab 262144), so that what
#: is built per layer or per vocabulary entry before the weights are read stays small.
MAX_DIMENSIONS = {"vocab_size": 2**22, "num_layers": 1024, "hidden_size": 65536, "intermediate_size": 2**20,
                  "num_q_heads": 1024, "num_kv_heads": 1024, "head_dim": 1024}


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-architecture decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU).

    The defaults are the tiny model the tests use; `vocab_size` 258 is the byte-level
    tokenizer's 256 bytes plus BOS and EOS. The family variants of real checkpoints
    (`executor.engine.hf`): `attention_bias` (Qwen2: biases on q/k/v), `qk_norm`
    (Qwen3: RMSNorm over each head of q and k before RoPE), `tie_word_embeddings`
    (the LM head is the embedding matrix), and RoPE scaling (`rope_type` "linear":
    inverse frequencies / `rope_factor`; "llama3": low frequencies / `rope_factor`,
    high ones kept, the band between `rope_original_max_positions / rope_low_freq_factor`
    and `/ rope_high_freq_factor` wavelengths blended).
    """

    vocab_size: int = 258
    num_layers: int = 2
    hidden_size: int = 64
    num_q_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    dtype: str = "float32"
    attention_bias: bool = False
    qk_norm: bool = False
    tie_word_embeddings: bool = False
    rope_type: str = "default"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_positions: int = 8192

    def __post_init__(self) -> None:
        _positive(
            self, "vocab_size", "num_layers", "hidden_size", "num_q_heads",
            "num_kv_heads", "head_dim", "intermediate_size",
        )
        for name, most in MAX_DIMENSIONS.items():
            if getattr(self, name) > most:
                raise ValueError(f"{name} must be at most {most}, got {getattr(self, name)}")
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(
                f"num_q_heads ({self.num_q_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if not self.rope_theta > 1:
            raise ValueError(f"rope_theta must be > 1, got {self.rope_theta}")
        if not self.rms_norm_eps >= 0:
            raise ValueError(f"rms_norm_eps must be >= 0, got {self.rms_norm_eps}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, got {self.dtype!r}")
        if self.rope_type not in ROPE_TYPES:
            raise ValueError(f"rope_type must be one of {ROPE_TYPES}, got {self.rope_type!r}")
        if not self.rope_factor > 0:
            raise ValueError(f"rope_factor must be > 0, got {self.rope_factor}")
        if self.rope_type == "llama3" and not self.rope_high_freq_factor > self.rope_low_freq_factor > 0:
            raise ValueError(
                f"rope_high_freq_factor ({self.rope_high_freq_factor}) must exceed "
                f"rope_low_freq_factor ({self.rope_low_freq_factor}) > 0"
            )
        _positive(self, "rope_original_max_positions")

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token over all layers, in bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * DTYPE_BYTES[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a mapping; unknown keys are an error naming them."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig fields: {unknown}")
        return cls(**data)


@dataclass(frozen=True)
class EngineConfig:
    """How one engine instance runs: ops backend, KV pool, batching limits.

    `chunked_prefill_tokens` None: the serving loop runs a new prompt whole in a forward of
    its own between decode steps (up to `max_prefill_tokens` per forward). An int C:
    chunked prefill — every step carries the running decodes plus at most C prompt tokens
    (a long prompt spans several steps, each chunk an extend over the KV of the ones
    before), and `prefill` computes a prompt in forwards of at most C tokens.
    """

    backend: str  # "torch" (reference, CPU or GPU) or "triton" (GPU, or TRITON_INTERPRET=1)
    block_size: int = 8
    num_blocks: int = 256
    max_running_requests: int = 16
    max_prefill_tokens: int = 1024
    enable_prefix_cache: bool = True
    chunked_prefill_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        _positive(self, "block_size", "num_blocks", "max_running_requests", "max_prefill_tokens")
        if self.chunked_prefill_tokens is not None:
            _positive(self, "chunked_prefill_tokens")
