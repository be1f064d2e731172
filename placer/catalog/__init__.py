"""Hardware and model catalog: datasheet figures shipped as package data.

in:  ``chips.csv`` and ``models.csv`` beside this file (sources in ``SOURCES.md``)
out: frozen :class:`Chip` and :class:`ModelConfig` records, looked up by name.

Measured corrections are separate, named fields (``*_efficiency`` plus ``profile``
provenance); the datasheet figures themselves are never edited in place.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

from placer.errors import UnknownChipError, UnknownModelError

#: Fraction of datasheet dense peak a tuned kernel sustains when no profile says
#: otherwise (measured bf16 matmul is ~80 % of peak on H100, 51-60 % on MI300X;
#: attention and MoE dispatch pull whole-model prefill lower).
DEFAULT_COMPUTE_EFFICIENCY = 0.65
#: Fraction of datasheet HBM bandwidth a decode step reaches.
DEFAULT_MEM_BW_EFFICIENCY = 0.80
#: Fraction of datasheet scale-up / NIC bandwidth that collectives and RDMA reach.
DEFAULT_INTERCONNECT_EFFICIENCY = 0.75


@dataclass(frozen=True)
class Precision:
    """What a weight or KV element type costs: bytes per value (scales included) and the tensor-core
    rate its GEMMs run at (``compute``: the chip's peak of that dtype; "fp4" needs a chip with it)."""

    bytes_per_value: float
    compute: str


#: Weight element types. fp8: E4M3 (block scales negligible, as before). int8 / int4: weight-only
#: (W8A16 / W4A16, GPTQ/AWQ-style, one fp16 scale per group of 128: +2/128 B per value); the GEMMs
#: dequantize to bf16 in registers (Marlin-style kernels) and run at the bf16 rate — the bytes shrink,
#: the FLOP rate does not. fp4: NVFP4 (E2M1 values, one FP8 E4M3 scale per 16: +1/16 B), W4A4 at the
#: chip's fp4 tensor-core rate — only on chips whose datasheet has one (``Chip.fp4_tflops``).
WEIGHT_PRECISIONS = {
    "bf16": Precision(2.0, "bf16"),
    "fp8": Precision(1.0, "fp8"),
    "int8": Precision(1.0 + 2 / 128, "bf16"),
    "int4": Precision(0.5 + 2 / 128, "bf16"),
    "fp4": Precision(0.5 + 1 / 16, "fp4"),
}
#: KV-cache element types. fp8: E4M3, per-tensor scale. int8: per-token, per-head scale and zero
#: point (two fp16 per head_dim values, as LMDeploy's / vLLM's int8 KV). fp4: NVFP4 (one FP8 scale per
#: 16 values; Blackwell's fp4 KV cache, so only on chips with an fp4 rate). Attention itself runs its
#: core in bf16 after dequantization whatever the KV type (``compute`` = bf16), so a smaller KV buys
#: memory and bandwidth, not attention FLOPs.
KV_PRECISIONS = {
    "bf16": Precision(2.0, "bf16"),
    "fp8": Precision(1.0, "bf16"),
    "int8": Precision(1.0, "bf16"),  # + the per-head scale and zero, added per head in kv_bytes
    "fp4": Precision(0.5 + 1 / 16, "bf16"),
}
WEIGHT_DTYPES = tuple(WEIGHT_PRECISIONS)
KV_DTYPES = tuple(KV_PRECISIONS)
#: dtypes that need fp4 tensor cores on the chip (weights, or the KV cache)
FP4_DTYPES = ("fp4",)


@dataclass(frozen=True)
class Chip:
    """One accelerator: datasheet peaks (per chip) and the measured efficiencies."""

    name: str
    vendor: str
    bf16_tflops: float
    fp8_tflops: float | None  # None: no fp8 tensor cores (fp8 weights upcast to bf16)
    mem_gb: float
    mem_bw_tbps: float
    scaleup_gbps_bidir: float  # GB/s, NVLink-class, both directions together
    nic_gbit: float  # Gbit/s of RDMA NIC per chip
    tdp_w: float
    price_usd_per_h: float
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY
    mem_bw_efficiency: float = DEFAULT_MEM_BW_EFFICIENCY
    interconnect_efficiency: float = DEFAULT_INTERCONNECT_EFFICIENCY
    confidence: str = "medium"
    profile: str | None = None  # provenance of measured efficiencies, e.g. "profile 12 (2026-11-29)"
    fp4_tflops: float | None = None  # dense fp4 (NVFP4) peak; None: no fp4 tensor cores

    def peak_flops_per_s(self, dtype: str) -> float:
        """Datasheet dense peak FLOP/s for ``dtype`` ('bf16', 'fp8' or 'fp4'): fp8 without fp8 tensor
        cores runs at the bf16 rate (upcast); fp4 has no fallback (ValueError: plan it only where
        :meth:`has_rate` says so)."""
        if dtype == "fp4":
            if not self.fp4_tflops:
                raise ValueError(f"chip {self.name} has no fp4 rate in its datasheet")
            return self.fp4_tflops * 1e12
        if dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops * 1e12
        return self.bf16_tflops * 1e12

    def has_rate(self, dtype: str) -> bool:
        """Whether the datasheet gives a tensor-core rate for ``dtype`` (bf16 always; fp8 falls back to bf16)."""
        return bool(self.fp4_tflops) if dtype == "fp4" else True

    def flops_per_s(self, dtype: str) -> float:
        """Sustained FLOP/s: peak × measured (or default) compute efficiency."""
        return self.peak_flops_per_s(dtype) * self.compute_efficiency

    @property
    def mem_bytes(self) -> float:
        # Datasheet "GB" of HBM are binary: an H100 "80 GB" shows 81,559 MiB and an H200
        # "141 GB" 143,771 MiB in nvidia-smi, so read mem_gb as GiB.
        return self.mem_gb * 2**30

    @property
    def mem_bw_bytes_per_s(self) -> float:
        """Sustained HBM bandwidth."""
        return self.mem_bw_tbps * 1e12 * self.mem_bw_efficiency

    @property
    def scaleup_bytes_per_s(self) -> float:
        """Sustained one-direction scale-up bandwidth per chip (for TP collectives)."""
        return self.scaleup_gbps_bidir * 1e9 / 2 * self.interconnect_efficiency

    @property
    def nic_bytes_per_s(self) -> float:
        """Sustained RDMA bandwidth per chip."""
        return self.nic_gbit * 1e9 / 8 * self.interconnect_efficiency

    def with_changes(self, **changes) -> Chip:
        return replace(self, **changes)


@dataclass(frozen=True)
class ModelConfig:
    """What the performance model needs of an LLM's architecture."""

    name: str
    attn: str  # "gqa" or "mla"
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int = 0
    head_dim: int = 128
    kv_lora_rank: int = 0
    rope_dim: int = 0
    params_total_b: float = 0.0
    params_active_b: float = 0.0
    extra_kv_bytes_per_layer_fp8: int = 0
    sparse_topk_tokens: int = 0
    indexer_heads: int = 0
    indexer_head_dim: int = 0
    native_weight_dtype: str = "bf16"
    vocab: int = 0  # LM-head rows; 0: unknown (the LM head is then part of the per-token weights)
    moe_layers: int = 0  # layers whose FFN is routed experts
    experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0  # routed experts each token visits (top-k)
    expert_ffn: int = 0  # intermediate size of one expert
    shared_experts: int = 0  # experts every token visits besides the routed ones
    max_nodes_per_token: int = 0  # node-limited routing: a token's experts span at most this many nodes (0: any)
    tied_embeddings: bool = False  # the LM head reuses the embedding matrix (one hidden × vocab copy)
    #: the model's published FP8 checkpoint is block-scaled (one scale per 128×128 weight tile: DeepSeek-V3/R1,
    #: Kimi-K2 natively, Qwen3's official -FP8 releases); engines then run block-FP8 GEMMs (DeepGEMM, CUTLASS
    #: blockwise), not per-tensor ones (catalog SOURCES.md)
    fp8_block_checkpoint: bool = False
    #: the Hugging Face repository engines load for this model (``placer export``'s default ``--model``);
    #: "" for a scenario's own model (then ``--model`` or ``--model-dir`` names the checkpoint)
    hf_id: str = ""

    def kv_bytes_per_token(self, kv_dtype: str) -> float:
        """Bytes of KV cache one token occupies across all layers.

        GQA: layers × 2 (K and V) × kv_heads × head_dim × bytes.
        MLA: layers × (kv_lora_rank + rope_dim) × bytes; in fp8 the latent is
        packed as FlashMLA does (fp8 latent + one fp32 scale per 128 values + the
        rope part kept in bf16: 656 B/layer for DeepSeek-V3), plus any extra per-layer
        bytes such as DeepSeek-V3.2's indexer key.
        """
        return self.layers * self.kv_bytes_per_token_per_layer(kv_dtype)

    def kv_bytes_per_token_per_layer(self, kv_dtype: str) -> float:
        """One token's KV bytes in one layer (:data:`KV_PRECISIONS`): int8 adds an fp16 scale and zero
        per head; MLA in fp8/int8 packs as FlashMLA does, in fp4 the latent is NVFP4 and the rope bf16."""
        if kv_dtype not in KV_PRECISIONS:
            raise ValueError(f"kv_dtype must be one of {', '.join(KV_DTYPES)}, got {kv_dtype!r}")
        per_value = KV_PRECISIONS[kv_dtype].bytes_per_value
        if self.attn == "gqa":
            scales = 2 * 2 if kv_dtype == "int8" else 0  # fp16 scale + zero per head, for K and for V
            return 2 * self.kv_heads * (self.head_dim * per_value + scales)
        if kv_dtype == "bf16":
            main = (self.kv_lora_rank + self.rope_dim) * 2
        elif kv_dtype == "fp4":
            main = self.kv_lora_rank * per_value + self.rope_dim * 2
        else:
            main = self.kv_lora_rank + 4 * math.ceil(self.kv_lora_rank / 128) + self.rope_dim * 2
        indexer = self.extra_kv_bytes_per_layer_fp8  # stored in fp8 whatever the KV dtype
        return main + indexer

    def indexer_bytes_per_token(self) -> float:
        """Bytes per token (all layers) that a sparse-attention indexer reads for every past token."""
        return self.layers * self.extra_kv_bytes_per_layer_fp8

    def attn_flops_per_token_pair(self) -> float:
        """FLOPs for one query token attending to one past token, all layers (QK^T and PV).

        MLA counts the absorbed form (query and value in the latent space), which is
        what serving systems run for both prefill with long prefixes and decode.
        """
        if self.attn == "gqa":
            return 2 * self.layers * self.q_heads * (2 * self.head_dim)
        return 2 * self.layers * self.q_heads * (2 * self.kv_lora_rank + self.rope_dim)

    def mha_flops_per_token_pair(self) -> float:
        """MLA in the standard multi-head form (prefill of fresh tokens), all layers: QK^T over
        head_dim + rope_dim and PV over head_dim per head — 2·L·H·(2d + d_rope), ≈ 5.0 MFLOP for
        DeepSeek-V3 against ≈ 17.0 MFLOP absorbed (DeepSeek-V3 config: qk_nope 128, rope 64, v 128)."""
        return 2 * self.layers * self.q_heads * (2 * self.head_dim + self.rope_dim)

    def mla_kv_up_flops_per_token(self) -> float:
        """FLOPs to up-project one cached latent to per-head keys and values (the multi-head
        form's price for a cached prefix): 2·L·r_kv·H·2d."""
        return 2 * self.layers * self.kv_lora_rank * self.q_heads * 2 * self.head_dim

    def indexer_flops_per_token_pair(self) -> float:
        return 2 * self.layers * self.indexer_heads * self.indexer_head_dim

    def weight_bytes(self, weight_dtype: str) -> float:
        return self.params_total_b * 1e9 * WEIGHT_PRECISIONS[weight_dtype].bytes_per_value

    @property
    def lm_head_params(self) -> float:
        """Parameters of the LM head (hidden × vocab): FLOPs only for tokens whose logits are needed."""
        return self.hidden * self.vocab

    @property
    def embedding_params(self) -> float:
        """Parameters of a separate input embedding (a lookup: no FLOPs); 0 when tied to the LM head."""
        return 0.0 if self.tied_embeddings else self.lm_head_params

    @property
    def routed_expert_params_active(self) -> float:
        """Parameters of the routed experts one token visits (3 matrices hidden × expert_ffn each)."""
        return self.moe_layers * self.experts_per_token * 3 * self.hidden * self.expert_ffn

    @property
    def active_fraction(self) -> float:
        return self.params_active_b / self.params_total_b if self.params_total_b else 1.0


def _float(value: str) -> float | None:
    value = value.strip()
    return float(value) if value else None


#: model families whose published FP8 checkpoints are block-scaled 128×128 (catalog SOURCES.md)
FP8_BLOCK_FAMILIES = ("deepseek", "kimi", "qwen3")


def _rows(filename: str) -> list[dict[str, str]]:
    text = resources.files(__package__).joinpath(filename).read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return list(csv.DictReader(lines))


@lru_cache(maxsize=1)
def chip_catalog() -> dict[str, Chip]:
    """The bundled chips, by name."""
    chips = {}
    for row in _rows("chips.csv"):
        chips[row["name"]] = Chip(
            name=row["name"],
            vendor=row["vendor"],
            bf16_tflops=float(row["bf16_tflops"]),
            fp8_tflops=_float(row["fp8_tflops"]),
            mem_gb=float(row["mem_gb"]),
            mem_bw_tbps=float(row["mem_bw_tbps"]),
            scaleup_gbps_bidir=float(row["scaleup_gbps_bidir"]),
            nic_gbit=float(row["nic_gbit"]),
            tdp_w=float(row["tdp_w"]),
            price_usd_per_h=float(row["price_usd_h"]),
            confidence=row["confidence"],
            fp4_tflops=_float(row.get("fp4_tflops") or ""),
        )
    return chips


@lru_cache(maxsize=1)
def model_catalog() -> dict[str, ModelConfig]:
    """The bundled models, by name."""
    models = {}
    for row in _rows("models.csv"):
        models[row["name"]] = ModelConfig(
            name=row["name"],
            attn=row["attn"],
            layers=int(row["layers"]),
            hidden=int(row["hidden"]),
            q_heads=int(row["q_heads"]),
            kv_heads=int(_float(row["kv_heads"]) or 0),
            head_dim=int(row["head_dim"]),
            kv_lora_rank=int(_float(row["kv_lora_rank"]) or 0),
            rope_dim=int(_float(row["rope_dim"]) or 0),
            params_total_b=float(row["params_total_b"]),
            params_active_b=float(row["params_active_b"]),
            extra_kv_bytes_per_layer_fp8=int(row["extra_kv_bytes_per_layer_fp8"] or 0),
            sparse_topk_tokens=int(row["sparse_topk_tokens"] or 0),
            indexer_heads=int(row["indexer_heads"] or 0),
            indexer_head_dim=int(row["indexer_head_dim"] or 0),
            native_weight_dtype="fp8" if row["name"].startswith(("deepseek", "kimi")) else "bf16",
            **{k: int(row.get(k) or 0) for k in ("vocab", "moe_layers", "experts", "experts_per_token",
                                                  "expert_ffn", "shared_experts", "max_nodes_per_token")},
            tied_embeddings=row.get("tied_embeddings", "0").strip() == "1",
            fp8_block_checkpoint=row["name"].startswith(FP8_BLOCK_FAMILIES),
            hf_id=(row.get("hf_id") or "").strip(),
        )
    return models


def get_chip(name: str) -> Chip:
    try:
        return chip_catalog()[name]
    except KeyError:
        raise UnknownChipError(name, sorted(chip_catalog())) from None


def get_model(name: str) -> ModelConfig:
    try:
        return model_catalog()[name]
    except KeyError:
        raise UnknownModelError(name, sorted(model_catalog())) from None
