"""Performance model: roofline on the four chip dimensions × efficiency.

in:  a :class:`~placer.catalog.Chip`, a tensor-parallel degree, a
     :class:`~placer.catalog.ModelConfig`, dtypes
out: seconds and bytes: prefill time, decode step time, largest batch, transfer
     times, extend-decode cost, waiting-time percentiles.

An *instance* is ``tp`` chips that together hold the weights (at the weight dtype)
plus the working KV. All figures use sustained rates: datasheet peak × the chip's
compute / memory-bandwidth / interconnect efficiency (measured profiles replace the
defaults). Formulas, per instance with ``tp`` chips:

* compute rate  F = tp × peak_flops(dtype) × eff_compute   (fp8 if weights are fp8 and
  the chip has fp8 tensor cores, bf16 otherwise)
* HBM rate      M = tp × mem_bw × eff_mem
* KV capacity   K = tp × mem × 0.90 − weight_bytes  (10 % kept for activations/runtime)
* Parallel communication per layer, S = scale-up bandwidth per chip (NIC per chip once
  tp exceeds the 8-chip scale-up domain), α = 5 µs (20 µs across nodes):
  dense models, tensor parallel, 2 ring all-reduces:
  t = 2 × layers × (α + 2(tp−1)/tp × tokens × hidden × 2 B / S), added to compute;
  MoE models, expert parallel + data-parallel attention, all-to-all dispatch + combine
  of each chip's tokens/tp tokens to 8 routed experts:
  t = 2 × layers × (α + tokens/tp × hidden × 2 B × min(8, tp) × (tp−1)/tp / S),
  overlapped with compute (two micro-batches), so time = max(compute, memory, comm).
* Prefill of I tokens at hit rate h: n = max(1, (1−h)·I) new tokens after c = h·I cached,
  computed in ⌈n/chunk⌉ forwards (chunked prefill), each its own roofline: a chunk of t
  tokens at positions [s, s+t) costs FLOPs = 2·active·t + attention pairs·flops_per_pair
  (+ indexer pairs for sparse attention), pairs = Σ_{p=s}^{s+t−1} p (dense, the
  quadratic part) or Σ min(p, topk); memory = one weight read + the prompt's KV;
  time = max(FLOPs/F, bytes/M) + comm(t) + overhead. The prompt's time is the sum over
  its chunks, so a small tail chunk pays a whole weight read (memory bound) — the
  throughput the BCR-vs-hit curve loses just past each chunk boundary.
* Decode step at batch B, context L: bytes = weights × (1 − (1 − active/total)^B)
  (MoE experts touched by B tokens) + B × KV read per sequence (L tokens, or topk +
  the indexer's keys for sparse attention); FLOPs = 2·active·B + B × attention;
  time = max(bytes/M, FLOPs/F) + comm(B) + 1 ms step overhead.
* Largest batch: the biggest B with step(B, L) ≤ TPOT and B × L_resident × kv ≤ K.
* Transfer of b bytes: b / bandwidth + latency (RDMA: tp × NIC of the sender; WAN:
  the line's share, see :func:`wan_transfer_s`).
* Waiting at P: each P instance is an M/G/1 FCFS queue (Poisson arrivals; service
  times = the class mix's prefill times). Pollaczek–Khinchine gives E[W] =
  λE[S²]/(2(1−ρ)); the tail is taken exponential with an atom at zero:
  P(W > t) ≈ ρ·exp(−tρ/E[W]). Assumptions: arrivals Poisson and split evenly over a
  pool's instances, FCFS, and (in the MILP) no batching across requests in prefill —
  conservative: :func:`placer.flows.packed_wait_law` adds the packing of short
  prompts into shared forwards, which the simulator (placer.sim) measures along with
  what all of these assumptions miss (bursts, link sharing, decode admission).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from placer.catalog import Chip, ModelConfig

USABLE_MEM_FRACTION = 0.90
SCALEUP_DOMAIN_CHIPS = 8
COLLECTIVE_LATENCY_S = 5e-6
CROSS_NODE_COLLECTIVE_LATENCY_S = 20e-6
DECODE_STEP_OVERHEAD_S = 1e-3
PREFILL_CHUNK_OVERHEAD_S = 2e-3
RDMA_LATENCY_S = 2e-3
ACT_BYTES = 2  # bf16 activations
MAX_BATCH = 1024
MOE_ROUTED_EXPERTS = 8  # routed experts per token (DeepSeek-V3/Kimi-K2/Qwen3-MoE all use 8)


@dataclass(frozen=True)
class InstanceModel:
    """Timing and memory of one instance: ``tp`` chips of ``chip`` serving ``model``."""

    chip: Chip
    tp: int
    model: ModelConfig
    weight_dtype: str
    kv_dtype: str
    prefill_chunk_tokens: int = 8192

    # ---- resources -------------------------------------------------------
    @cached_property
    def compute_dtype(self) -> str:
        return "fp8" if self.weight_dtype == "fp8" and self.chip.fp8_tflops else "bf16"

    @cached_property
    def flops_per_s(self) -> float:
        return self.tp * self.chip.flops_per_s(self.compute_dtype)

    @cached_property
    def mem_bw_bytes_per_s(self) -> float:
        return self.tp * self.chip.mem_bw_bytes_per_s

    @cached_property
    def weight_bytes(self) -> float:
        return self.model.weight_bytes(self.weight_dtype)

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

    # ---- collectives -----------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.model.active_fraction < 1.0

    def comm_s(self, tokens: float) -> float:
        """Parallel-communication seconds for one forward over ``tokens`` tokens.

        Dense models: tensor parallel, two ring all-reduces of the activations per
        layer. MoE models: expert parallel with data-parallel attention, one
        all-to-all dispatch and one combine per layer, each chip sending its own
        tokens/tp tokens to ``MOE_ROUTED_EXPERTS`` experts.
        """
        if self.tp == 1:
            return 0.0
        if self.tp <= SCALEUP_DOMAIN_CHIPS:
            bw, alpha = self.chip.scaleup_bytes_per_s, COLLECTIVE_LATENCY_S
        else:
            bw = min(self.chip.scaleup_bytes_per_s, self.chip.nic_bytes_per_s)
            alpha = CROSS_NODE_COLLECTIVE_LATENCY_S
        remote = (self.tp - 1) / self.tp
        if self.is_moe:
            fanout = min(MOE_ROUTED_EXPERTS, self.tp)
            volume = (tokens / self.tp) * self.model.hidden * ACT_BYTES * fanout * remote
        else:
            volume = 2 * remote * tokens * self.model.hidden * ACT_BYTES
        return 2 * self.model.layers * (alpha + volume / bw)

    # ---- attention work --------------------------------------------------
    def _attn_pairs(self, start: float, end: float) -> tuple[float, float]:
        """(attention pairs, indexer pairs) for query positions start..end-1."""
        dense = (end * end - start * start) / 2
        topk = self.model.sparse_topk_tokens
        if not topk:
            return dense, 0.0
        below_end = min(end, topk)
        below = max(0.0, (below_end * below_end - min(start, topk) ** 2) / 2) if start < topk else 0.0
        above = max(0.0, end - max(start, topk)) * topk
        return below + above, dense

    def _attn_flops(self, start: float, end: float) -> float:
        pairs, idx_pairs = self._attn_pairs(start, end)
        return pairs * self.model.attn_flops_per_token_pair() + idx_pairs * self.model.indexer_flops_per_token_pair()

    # ---- prefill -----------------------------------------------------------
    def prefill_s(self, input_tokens: float, hit_rate: float) -> float:
        """Seconds to prefill one request (cached prefix reused; computes the rest chunk by chunk)."""
        cached = hit_rate * input_tokens
        new = max(1.0, input_tokens - cached)
        start = input_tokens - new
        chunk = self.prefill_chunk_tokens
        total = 0.0
        while new > 1e-9:
            t = min(new, chunk)
            total += self.prefill_chunk_s(input_tokens, start, t)
            start += t
            new -= t
        return total

    def prefill_chunk_parts(self, input_tokens: float, start: float, tokens: float) -> tuple[float, float]:
        """(FLOPs, memory bytes besides the weight read) of one prefill chunk of ``tokens``
        new tokens at positions [start, start + tokens) of a prompt of ``input_tokens``."""
        flops = 2 * self.model.params_active_b * 1e9 * tokens + self._attn_flops(start, start + tokens)
        return flops, input_tokens * self.kv_bytes_per_token

    def prefill_chunk_s(self, input_tokens: float, start: float, tokens: float) -> float:
        """Seconds of one prefill forward over one chunk (see :meth:`prefill_chunk_parts`)."""
        flops, kv_bytes = self.prefill_chunk_parts(input_tokens, start, tokens)
        return self.forward_s(flops, self.weight_bytes + kv_bytes, tokens)

    def forward_s(self, flops: float, mem_bytes: float, tokens: float) -> float:
        """Seconds of one prefill forward moving ``mem_bytes`` and computing ``flops`` over ``tokens``."""
        return self._combine(flops / self.flops_per_s, mem_bytes / self.mem_bw_bytes_per_s, self.comm_s(tokens)) + (
            PREFILL_CHUNK_OVERHEAD_S
        )

    def _combine(self, compute_s: float, memory_s: float, comm_s: float) -> float:
        """MoE all-to-all overlaps compute (two micro-batches); TP all-reduce does not."""
        if self.is_moe:
            return max(compute_s, memory_s, comm_s)
        return max(compute_s, memory_s) + comm_s

    # ---- decode ------------------------------------------------------------
    def kv_read_bytes(self, context_tokens: float) -> float:
        """KV bytes one sequence reads per decode step."""
        topk = self.model.sparse_topk_tokens
        if not topk:
            return context_tokens * self.kv_bytes_per_token
        idx = self.model.indexer_bytes_per_token()
        return min(context_tokens, topk) * (self.kv_bytes_per_token - idx) + context_tokens * idx

    def step_s(self, batch: float, context_tokens: float) -> float:
        """Seconds for one decode step of ``batch`` sequences of ``context_tokens`` each."""
        batch = max(batch, 1.0)
        touched = 1.0 - (1.0 - self.model.active_fraction) ** batch
        mem_bytes = self.weight_bytes * touched + batch * self.kv_read_bytes(context_tokens)
        flops = 2 * self.model.params_active_b * 1e9 * batch + batch * self._attn_flops(
            context_tokens, context_tokens + 1
        )
        return self._combine(flops / self.flops_per_s, mem_bytes / self.mem_bw_bytes_per_s, self.comm_s(batch)) + (
            DECODE_STEP_OVERHEAD_S
        )

    def extend_s(self, tokens: int, context_tokens: float) -> float:
        """Seconds for one extend-decode pass over ``tokens`` given tokens (MD after a handoff)."""
        touched = 1.0 - (1.0 - self.model.active_fraction) ** max(tokens, 1)
        mem_bytes = self.weight_bytes * touched + self.kv_read_bytes(context_tokens + tokens)
        flops = 2 * self.model.params_active_b * 1e9 * tokens + self._attn_flops(
            context_tokens, context_tokens + tokens
        )
        return self._combine(flops / self.flops_per_s, mem_bytes / self.mem_bw_bytes_per_s, self.comm_s(tokens)) + (
            DECODE_STEP_OVERHEAD_S
        )

    def max_batch(self, context_tokens: float, tpot_s: float, resident_tokens: float | None = None) -> int:
        """Largest batch whose step meets ``tpot_s`` and whose KV fits (0 if none)."""
        resident = resident_tokens if resident_tokens is not None else context_tokens
        by_memory = int(self.kv_capacity_tokens // max(resident, 1.0))
        hi = min(MAX_BATCH, by_memory)
        if hi < 1 or self.step_s(1, context_tokens) > tpot_s:
            return 0
        lo = 1
        while lo < hi:  # step time grows with batch: bisect
            mid = (lo + hi + 1) // 2
            if self.step_s(mid, context_tokens) <= tpot_s:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def rdma_s(self, n_bytes: float, peer: InstanceModel | None = None) -> float:
        """Seconds to move ``n_bytes`` of KV to a peer in the same datacenter."""
        bw = self.rdma_bytes_per_s if peer is None else min(self.rdma_bytes_per_s, peer.rdma_bytes_per_s)
        return n_bytes / bw + RDMA_LATENCY_S


def wan_transfer_s(n_bytes: float, link_bytes_per_s: float, rtt_s: float, utilization: float) -> float:
    """Seconds for one KV transfer over a shared WAN line.

    Transfers share the line like processor sharing (concurrent TCP flows): at
    utilisation ρ a transfer of b bytes takes b / (C (1 − ρ)) on average, plus one
    round trip for the request/ack of the transfer protocol.
    """
    if n_bytes <= 0:
        return 0.0
    if link_bytes_per_s <= 0:
        return math.inf
    return n_bytes / (link_bytes_per_s * max(1e-3, 1.0 - utilization)) + rtt_s


@dataclass(frozen=True)
class WaitModel:
    """M/G/1 waiting time at utilisation ``rho`` with service moments ``mean_s``, ``second_moment_s2``."""

    rho: float
    mean_s: float
    second_moment_s2: float

    @property
    def mean_wait_s(self) -> float:
        if self.rho <= 0:
            return 0.0
        if self.rho >= 1:
            return math.inf
        lam = self.rho / self.mean_s
        return lam * self.second_moment_s2 / (2 * (1 - self.rho))

    def prob_exceeds(self, t: float) -> float:
        """P(W > t) ≈ ρ exp(−tρ/E[W]) for t ≥ 0; 1 for t < 0."""
        if t < 0:
            return 1.0
        if self.rho <= 0:
            return 0.0
        if self.rho >= 1:
            return 1.0
        return self.rho * math.exp(-t * self.rho / self.mean_wait_s)

    def quantile_s(self, q: float) -> float:
        if self.rho <= 0 or 1 - q >= self.rho:
            return 0.0
        if self.rho >= 1:
            return math.inf
        return self.mean_wait_s / self.rho * math.log(self.rho / (1 - q))
