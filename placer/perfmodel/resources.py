"""What one instance holds and how fast it runs: the first layer of :class:`~placer.perfmodel.InstanceModel`.

in:  a :class:`~placer.catalog.Chip`, the instance's chips (``tp``) and pipeline stages (``pp``), a
     :class:`~placer.catalog.ModelConfig`, the weights' and the KV's dtypes
out: weight bytes (non-expert weights once per replica with data-parallel attention), KV capacity,
     the sustained GEMM / attention FLOP/s and HBM bytes/s, the NIC rate, price and power, the
     batch ceiling; :func:`pipeline_stages`, the tp × pp shape rule
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from placer.catalog import FP4_DTYPES, KV_PRECISIONS, WEIGHT_PRECISIONS, Chip, ModelConfig
from placer.perfmodel.constants import (
    EP_COMM_SM_FRACTION, EXPERT_LOAD_BALANCE, MAX_BATCH_PER_CHIP, SCALEUP_DOMAIN_CHIPS, USABLE_MEM_FRACTION,
)


@dataclass(frozen=True)
class InstanceResources:
    """One instance's fields and resources: ``tp`` chips of ``chip`` serving ``model`` (the times are
    :class:`~placer.perfmodel.InstanceModel`'s, which extends this class)."""


    chip: Chip
    tp: int
    model: ModelConfig
    weight_dtype: str
    kv_dtype: str
    prefill_chunk_tokens: int = 8192
    mtp_accept: float = 1.0  # tokens emitted per decode step on average (1: no speculative decoding)
    pp: int = 1  # pipeline stages, each of tp // pp chips holding layers/pp (1: no pipeline parallelism)

    @cached_property
    def stage_tp(self) -> int:
        """Chips of one pipeline stage (the tensor-parallel group); ``tp`` when pp = 1."""
        return self.tp // self.pp

    # ---- resources -------------------------------------------------------
    @cached_property
    def compute_dtype(self) -> str:
        """The GEMMs' tensor-core type (:data:`placer.catalog.WEIGHT_PRECISIONS`): fp8 weights at the fp8
        rate where the chip has one (else upcast to bf16), int8/int4 weight-only at bf16, fp4 at fp4."""
        dtype = WEIGHT_PRECISIONS[self.weight_dtype].compute
        return "bf16" if dtype == "fp8" and not self.chip.fp8_tflops else dtype

    @cached_property
    def unsupported(self) -> str | None:
        """Why this chip cannot run the dtypes (fp4 weights or KV need the chip's fp4 rate), else None."""
        for what, dtype in (("weights", self.weight_dtype), ("KV cache", self.kv_dtype)):
            if dtype in FP4_DTYPES and not self.chip.has_rate(dtype):
                return f"{self.chip.name}: {dtype} {what} need fp4 tensor cores, its datasheet has no fp4 rate"
        return None

    @cached_property
    def flops_per_s(self) -> float:
        """Dense-GEMM rate at large M (the unit of the FLOP-equivalents of :meth:`forward_s`)."""
        return self.tp * self.chip.flops_per_s(self.compute_dtype)

    @cached_property
    def attn_flops_per_s(self) -> float:
        return self.tp * self.chip.flops_per_s(KV_PRECISIONS[self.kv_dtype].compute)

    @cached_property
    def expert_rate_factor(self) -> float:
        """Expert GEMM rate / dense GEMM rate (load balance and the SMs the all-to-all takes)."""
        if not self.is_moe or self.tp == 1:
            return 1.0
        return EXPERT_LOAD_BALANCE * (1.0 - EP_COMM_SM_FRACTION)

    @cached_property
    def mem_bw_bytes_per_s(self) -> float:
        return self.tp * self.chip.mem_bw_bytes_per_s

    @cached_property
    def bytes_per_param(self) -> float:
        return WEIGHT_PRECISIONS[self.weight_dtype].bytes_per_value

    @cached_property
    def _replicas(self) -> int:
        """Copies of the non-expert weights: one per chip with data-parallel attention (MoE, when
        the replicas fit in memory), else one (tensor-parallel attention)."""
        if not (self.is_moe and self.model.moe_layers and self.tp > 1):
            return 1
        dense = self.model.params_total_b * 1e9 - self.expert_params
        replicated = (self.tp * dense + self.expert_params) * self.bytes_per_param
        return self.tp if replicated <= self.tp * self.chip.mem_bytes * USABLE_MEM_FRACTION else 1

    @cached_property
    def expert_params(self) -> float:
        m = self.model
        return m.moe_layers * m.experts * 3 * m.hidden * m.expert_ffn

    @cached_property
    def weight_bytes(self) -> float:
        """Bytes of weights the instance holds (non-expert weights once per replica)."""
        total = self.model.params_total_b * 1e9
        dense = total - self.expert_params
        return (self._replicas * dense + self.expert_params) * self.bytes_per_param

    @cached_property
    def kv_capacity_bytes(self) -> float:
        return self.tp * self.chip.mem_bytes * USABLE_MEM_FRACTION - self.weight_bytes

    @cached_property
    def kv_bytes_per_token(self) -> float:
        return self.model.kv_bytes_per_token(self.kv_dtype)

    @cached_property
    def kv_capacity_tokens(self) -> float:
        return max(0.0, self.kv_capacity_bytes / self.kv_bytes_per_token)

    def fits(self, context_tokens: int) -> bool:
        """True when the weights fit and the KV of one ``context_tokens`` request fits."""
        return self.kv_capacity_tokens >= context_tokens

    @cached_property
    def rdma_bytes_per_s(self) -> float:
        return self.tp * self.chip.nic_bytes_per_s

    @cached_property
    def price_usd_per_h(self) -> float:
        return self.tp * self.chip.price_usd_per_h

    @cached_property
    def power_kw(self) -> float:
        return self.tp * self.chip.tdp_w / 1000

    @cached_property
    def batch_cap(self) -> int:
        return MAX_BATCH_PER_CHIP * self.tp

    @property
    def is_moe(self) -> bool:
        return self.model.active_fraction < 1.0


def pipeline_stages(model: ModelConfig, chips: int, enabled: bool) -> int:
    """Pipeline stages of an instance of ``chips`` chips: with pipeline parallelism ``enabled``, a dense
    model on more chips than one scale-up domain runs one stage per domain (tensor parallel inside the
    node over NVLink, activations between nodes) instead of tensor parallel across nodes; else 1.
    MoE models keep one stage (expert parallel spans nodes)."""
    dense = model.params_active_b >= model.params_total_b
    if enabled and dense and chips > SCALEUP_DOMAIN_CHIPS and chips % SCALEUP_DOMAIN_CHIPS == 0:
        return chips // SCALEUP_DOMAIN_CHIPS
    return 1
