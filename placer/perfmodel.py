"""Performance model: roofline on the four chip dimensions × efficiency, per kind of work.

in:  a :class:`~placer.catalog.Chip`, a tensor-parallel degree, a
     :class:`~placer.catalog.ModelConfig`, dtypes, MTP's accepted tokens per step
out: seconds and bytes: prefill time, decode step time, largest batch, transfer
     times, extend-decode cost, waiting-time percentiles, and the compute / memory /
     communication terms behind each time (:meth:`InstanceModel.terms`).

An *instance* is ``tp`` chips that together hold the weights plus the working KV. Dense
models run tensor parallel; MoE models run expert parallel with data-parallel attention
(each chip holds a replica of the non-expert weights and 1/tp of the experts; when the
replicas do not fit, attention is tensor parallel and the non-expert weights held once). Sustained
rates are datasheet peak × the chip's efficiencies (measured profiles replace the defaults).

Rates, per instance of ``tp`` chips (E = the chip's compute efficiency):
* dense GEMM   F = tp × peak(the weights' compute type: fp8 if weights fp8 and the chip has fp8,
  fp4 for NVFP4 weights (only on chips with an fp4 rate), else bf16 — int8/int4 are weight-only
  and run bf16 GEMMs; :data:`placer.catalog.WEIGHT_PRECISIONS`) × E × g(M)
* expert GEMM  F × :data:`EXPERT_LOAD_BALANCE` × (1 − :data:`EP_COMM_SM_FRACTION`) with
  expert parallelism (tp > 1), at g(tokens per expert)
* attention    tp × peak(bf16) × E (FlashAttention / FlashMLA run the core in bf16)
* g(M) = M / (M + :data:`GEMM_TILE_M`/2): a GEMM over M rows pads M to whole 64-row
  tiles (Hopper's wgmma instruction is 64 rows deep); the expected padding of a uniform
  remainder is half a tile. M = tokens per chip of the forward.
* HBM M = tp × mem_bw × eff_mem; KV capacity K = tp × mem × 0.90 − weight_bytes.

FLOPs per token: 2 × (active − embedding − LM head) for every token, the LM head
(2 × hidden × vocab) only for tokens whose logits are sampled (the last prompt token, every
decode position), the embedding a lookup (no FLOPs, not streamed in decode).
Attention per (query, key) pair, all layers: GQA 2·L·H·2d; MLA absorbed (decode)
2·L·H·(2·r_kv + d_rope) ≈ 17 MFLOP for DeepSeek-V3; MLA non-absorbed (prefill)
2·L·H·(d + d_rope + d) ≈ 5 MFLOP plus the up-projection of every cached prefix key
(2·L·r_kv·H·2d per prefix token), the cheaper of the two forms per chunk (what SGLang and
vLLM choose between). Sparse attention (DSA): min(p, top-k) pairs plus the indexer.
Elementwise kernels between the GEMMs (LLM-Viewer's operator list, Yuan et al. 2024, arXiv
2402.16363: attn_norm, mlp_norm, attn_add, mlp_add, mlp_act) move bytes, not FLOPs, and run
one after another with the GEMMs at the HBM rate: per token and layer, each of the two norms
reads and writes the hidden state, each of the two residual adds reads two and writes one, the
gated activation reads gate and up and writes one of the FFN width f (dense: from the
parameter count; MoE: (k + shared) × expert_ffn) — (10·hidden + 3·f) activations × 2 B. Under
tensor parallelism every rank normalises and adds the full hidden state (after the
all-reduce) and activates f/tp; with data-parallel attention each token is on one rank.
Separate kernels as placer's own engine runs them (executor/engine/model.py: rms_norm, then the
residual add); TensorRT-LLM's performance page lists the activation as a separate kernel too
("one Matmul followed by a separate SwiGLU kernel", docs/source/performance.md, v0.8-v0.9 Known
Issues). Engines that fuse the add into the next norm (vLLM ``fused_add_rms_norm``) move
8·hidden instead of 10·hidden: ≤ 3 % on bench/bench_fidelity.py's rows.

Communication per forward of T tokens (chip count tp, nodes N = ⌈tp/8⌉):
* dense, tensor parallel: 2 ring all-reduces per layer,
  t = 2·layers·(α(tp) + 2(tp−1)/tp · T·hidden·2 B / S), S = scale-up (NIC across nodes);
  α(tp) = launch + NCCL's ring-LL latency 3.6 µs + 2(tp−1) hops × 0.47 µs (NVLink) or
  2.7 µs (network) — NCCL's own tuning model, src/graph/tuning.cc; not overlapped.
* MoE, expert parallel (DeepEP, deepseek-ai/DeepEP README): dispatch in FP8 (hidden bytes +
  one fp32 scale per 128), combine in BF16, per MoE layer. Prefill (normal kernels): a token
  crosses the network once per destination node, at most ``max_nodes_per_token`` nodes
  (DeepSeek-V3's node-limited routing, topk_group = 4) and is forwarded over NVLink inside
  the node; volume per chip = T/tp · min(k, limit, N)·(N−1)/N · (fp8 + bf16 bytes) over the
  chip's NIC. Decode (low-latency kernels): each token is sent to each of its k experts
  directly, T/tp · k·(tp−1)/tp · bytes per chip. The busiest rank receives 1/0.85 of the mean
  (its experts' load, :data:`EXPERT_LOAD_BALANCE`). Overlapped with compute (two
  micro-batches): time = max(compute, memory, comm).
Steps: time = combine(compute, memory, comm) + a fixed overhead per forward (decode 1 ms:
scheduling, sampling and the host launch of one step; prefill 2 ms per chunk). A decode or
aggregated step takes a roofline per kind of kernel and sums them (the GEMMs: max(linear FLOPs,
weight read); the attention: max(attention FLOPs, KV read)) — they run one after the other, so
a compute-bound GEMM cannot hide the attention's KV read (LLM-Viewer's per-operator roofline);
the elementwise kernels add their bytes / HBM rate (in prefill as FLOP-equivalents of the
compute term: they run between the GEMMs, not under them).
* Prefill of I tokens at hit rate h: n = max(1, (1−h)·I) new tokens after h·I cached, in
  ⌈n/chunk⌉ forwards, each its own roofline (work above; memory = one weight read + the
  prompt's KV). A small tail chunk pays a whole weight read (memory bound) — the throughput
  the BCR-vs-hit curve loses just past each chunk boundary.
* Decode at batch B, context L, MTP (``mtp_accept`` a tokens per step, 1 + d positions
  verified per sequence, d = ⌈a⌉ − 1): the forward covers B(1 + d) tokens; KV read once per
  sequence; tokens/s = B·a/step; TPOT = step / a.
* Largest batch: the biggest B with step(B, L)/a ≤ TPOT, B × resident × kv ≤ K and
  B ≤ :data:`MAX_BATCH_PER_CHIP` × tp.
* Transfer of b bytes: b / bandwidth + latency (RDMA: tp × NIC of the sender; WAN:
  the line's share, see :func:`placer.queueing.wan_transfer_s`).
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

from placer.catalog import FP4_DTYPES, KV_PRECISIONS, WEIGHT_PRECISIONS, Chip, ModelConfig

USABLE_MEM_FRACTION = 0.90
SCALEUP_DOMAIN_CHIPS = 8
#: host launch of one collective kernel (CUDA launch latency, ~5 µs).
KERNEL_LAUNCH_S = 5e-6
#: NCCL's ring all-reduce latency model, LL protocol (NVIDIA/nccl src/graph/tuning.cc:
#: baseLat Ring/LL 3.6 µs; hwLat Ring/LL NVLink 0.47 µs, network 2.7 µs per step).
NCCL_RING_BASE_S = 3.6e-6
NCCL_NVLINK_HOP_S = 0.47e-6
NCCL_NET_HOP_S = 2.7e-6
#: latency of one expert-parallel all-to-all (dispatch or combine) inside / across nodes.
COLLECTIVE_LATENCY_S = 5e-6
CROSS_NODE_COLLECTIVE_LATENCY_S = 20e-6
DECODE_STEP_OVERHEAD_S = 1e-3
PREFILL_CHUNK_OVERHEAD_S = 2e-3
RDMA_LATENCY_S = 2e-3
ACT_BYTES = 2  # bf16 activations (TP all-reduce, EP combine)
FP8_SCALE_GROUP = 128  # DeepEP FP8 dispatch: one fp32 scale per 128 values
#: engines' ceiling on running sequences, per chip (vLLM max_num_seqs 1024, TensorRT-LLM
#: max_batch_size 2048): memory and the TPOT bind first in practice.
MAX_BATCH_PER_CHIP = 1024
MOE_ROUTED_EXPERTS = 8  # routed experts per token when the catalog does not say
#: the kinds of kernel a forward's time sums over (each its own roofline, :meth:`InstanceModel.decode_kernels`)
KERNEL_KINDS = ("linear", "attention", "elementwise")
#: rows of one tensor-core MMA tile (Hopper wgmma m64): small-M GEMMs pad to it.
GEMM_TILE_M = 64
#: mean / busiest expert-parallel rank's load with EPLB: SGLang's 96-H100 DeepSeek blog
#: (lmsys.org 2025-05-05) prefill 50,302 tok/s/node with EPLB vs 59,337 with simulated
#: perfect balance, 0.85.
EXPERT_LOAD_BALANCE = 0.85
#: SMs the all-to-all kernels take from the GEMMs while overlapped: DeepSeek-V3 technical
#: report §3.2.2 "only 20 SMs are sufficient" of the H800's 132.
EP_COMM_SM_FRACTION = 20 / 132


def gemm_efficiency(rows: float) -> float:
    """g(M) = M / (M + tile/2): the useful fraction of a GEMM's MMA work at M rows."""
    rows = max(rows, 1.0)
    return rows / (rows + GEMM_TILE_M / 2)


#: Most (input tokens, hit rate) pairs an instance keeps its prefill seconds for (:meth:`InstanceModel.prefill_s`).
PREFILL_MEMO_ENTRIES = 4096


@dataclass(frozen=True)
class InstanceModel:
    """Timing and memory of one instance: ``tp`` chips of ``chip`` serving ``model``."""

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

    # ---- collectives -----------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.model.active_fraction < 1.0

    @cached_property
    def _nodes(self) -> int:
        return math.ceil(self.stage_tp / SCALEUP_DOMAIN_CHIPS)

    def allreduce_s(self, n_bytes: float) -> float:
        """One ring all-reduce of ``n_bytes`` over a tensor-parallel group (the instance, or one
        pipeline stage): α(tp) + 2(tp−1)/tp · bytes / S."""
        tp, nodes = self.stage_tp, self._nodes
        inter_steps = 2 * (nodes - 1)
        alpha = KERNEL_LAUNCH_S + NCCL_RING_BASE_S + (2 * (tp - 1) - inter_steps) * NCCL_NVLINK_HOP_S \
            + inter_steps * NCCL_NET_HOP_S
        bw = self.chip.scaleup_bytes_per_s if nodes == 1 else min(self.chip.scaleup_bytes_per_s,
                                                                  self.chip.nic_bytes_per_s)
        return alpha + 2 * (tp - 1) / tp * n_bytes / bw

    def comm_s(self, tokens: float, prefill: bool = False) -> float:
        """Parallel-communication seconds for one forward over ``tokens`` tokens (see the module doc)."""
        if self.stage_tp == 1:
            return 0.0
        m = self.model
        if not self.is_moe:  # over all layers: with pp stages, each stage's group does layers/pp of them
            return 2 * m.layers * self.allreduce_s(tokens * m.hidden * ACT_BYTES)
        k = m.experts_per_token or MOE_ROUTED_EXPERTS
        per_token = m.hidden * (1 + 4 / FP8_SCALE_GROUP) + m.hidden * ACT_BYTES  # fp8 dispatch + bf16 combine
        nodes = self._nodes
        if prefill and nodes > 1:
            limit = m.max_nodes_per_token or nodes
            sends = min(k, limit, nodes) * (nodes - 1) / nodes
        else:
            sends = min(k, self.tp) * (self.tp - 1) / self.tp
        bw = self.chip.scaleup_bytes_per_s if nodes == 1 else min(self.chip.scaleup_bytes_per_s,
                                                                  self.chip.nic_bytes_per_s)
        alpha = COLLECTIVE_LATENCY_S if nodes == 1 else CROSS_NODE_COLLECTIVE_LATENCY_S
        layers = m.moe_layers or m.layers
        # the all-to-all ends when the busiest rank has received its tokens: load ∝ its experts' load
        return layers * (2 * alpha + tokens / self.tp * sends * per_token / (bw * EXPERT_LOAD_BALANCE))

    # ---- work ----------------------------------------------------------------
    @cached_property
    def ffn_width(self) -> float:
        """Width f of the gated activation one token computes per layer: MoE (k + shared) × expert_ffn;
        dense the intermediate size implied by the parameter count, (per-layer params − attention
        projections hidden·head_dim·(2·q_heads + 2·kv_heads)) / (3·hidden)."""
        m = self.model
        if m.moe_layers and m.experts:
            return (m.experts_per_token + m.shared_experts) * m.expert_ffn
        per_layer = (m.params_total_b * 1e9 - m.embedding_params - m.lm_head_params) / m.layers
        attention = m.hidden * m.head_dim * (2 * m.q_heads + 2 * m.kv_heads)
        return max(0.0, (per_layer - attention) / (3 * m.hidden))

    def elementwise_bytes(self, tokens: float) -> float:
        """HBM bytes the instance's norms, residual adds and gated activation move for ``tokens`` tokens
        (module doc): layers × (10·hidden·copies + 3·f) × 2 B per token, copies = the tensor-parallel
        ranks that each normalise the full hidden state (1 with data-parallel attention)."""
        m = self.model
        copies = self.stage_tp if self._replicas == 1 else 1
        return tokens * m.layers * (10 * m.hidden * copies + 3 * self.ffn_width) * ACT_BYTES

    def elementwise_s(self, tokens: float) -> float:
        """Seconds of the elementwise kernels over ``tokens`` tokens (memory bound, on every chip)."""
        return self.elementwise_bytes(tokens) / self.mem_bw_bytes_per_s

    @cached_property
    def _params(self) -> tuple[float, float, float]:
        """(per-token dense GEMM params, routed-expert params per token, LM-head params)."""
        m = self.model
        active = m.params_active_b * 1e9
        routed = m.routed_expert_params_active
        lm = m.lm_head_params
        return active - routed - lm - m.embedding_params, routed, lm  # the embedding is a lookup

    def _linear_work(self, tokens: float, logits: float, rows: float | None = None) -> float:
        """Dense-GEMM FLOP-equivalents of the linear layers over ``tokens`` tokens, ``logits`` LM-head
        rows, in a forward of ``rows`` tokens (default ``tokens``: the M of g(M))."""
        dense, routed, lm = self._params
        rows = tokens if rows is None else rows
        per_chip = rows / self.tp if self._replicas > 1 else rows
        work = 2 * dense * tokens / gemm_efficiency(per_chip) + 2 * lm * logits / gemm_efficiency(logits)
        return work + self.routed_expert_work(tokens, rows)

    def routed_expert_work(self, tokens: float, rows: float) -> float:
        """Dense-GEMM FLOP-equivalents of the routed experts' GEMMs over ``tokens`` tokens in a forward of
        ``rows`` rows: 2 × routed params per token × tokens / (g(rows·k/E) × :attr:`expert_rate_factor`),
        M = the rows each expert receives; 0 for a dense model. With data-parallel attention this is the
        part of a forward that expert parallelism spreads over every chip whichever rank the tokens came
        from (bench/bench_fidelity.py's lockstep bound)."""
        routed = self._params[1]
        if not routed:
            return 0.0
        m = self.model
        per_expert = rows * m.experts_per_token / m.experts
        return 2 * routed * tokens / (gemm_efficiency(per_expert) * self.expert_rate_factor)

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
        """Attention FLOPs (decode form: MLA absorbed) for query positions start..end-1."""
        pairs, idx_pairs = self._attn_pairs(start, end)
        return pairs * self.model.attn_flops_per_token_pair() + idx_pairs * self.model.indexer_flops_per_token_pair()

    def _attn_work(self, start: float, end: float, prefill: bool) -> float:
        """Dense-GEMM FLOP-equivalents of attention (bf16 rate) for query positions start..end-1."""
        scale = self.flops_per_s / self.attn_flops_per_s
        m = self.model
        if not (prefill and m.attn == "mla" and not m.sparse_topk_tokens):
            return self._attn_flops(start, end) * scale
        pairs, _ = self._attn_pairs(start, end)
        absorbed = pairs * m.attn_flops_per_token_pair()
        mha = pairs * m.mha_flops_per_token_pair() + start * m.mla_kv_up_flops_per_token()
        return min(absorbed, mha) * scale

    # ---- prefill -----------------------------------------------------------
    @cached_property
    def _prefill_memo(self) -> dict[tuple[float, float], float]:
        """:meth:`prefill_s` by (input tokens, hit rate): the planner asks it for the same few
        classes tens of thousands of times (eight-dc: ~20 000 calls for 8 classes per instance).
        At most PREFILL_MEMO_ENTRIES: a simulated trace asks for every request's own length."""
        return {}

    def prefill_s(self, input_tokens: float, hit_rate: float) -> float:
        """Seconds to prefill one request (cached prefix reused; computes the rest chunk by chunk)."""
        memo = self._prefill_memo
        key = (input_tokens, hit_rate)
        seconds = memo.get(key)
        if seconds is None:
            seconds = self._prefill_uncached_s(input_tokens, hit_rate)
            if len(memo) < PREFILL_MEMO_ENTRIES:
                memo[key] = seconds
        return seconds

    def _prefill_uncached_s(self, input_tokens: float, hit_rate: float) -> float:
        cached = hit_rate * input_tokens
        new = max(1.0, input_tokens - cached)
        start = input_tokens - new
        chunk = self.prefill_chunk_tokens
        total = last = 0.0
        t = 0.0
        while new > 1e-9:
            t = min(new, chunk)
            last = self.prefill_chunk_s(input_tokens, start, t)
            total += last
            start += t
            new -= t
        return total + self.pipeline_fill_s(last, t)

    def pipeline_fill_s(self, stage_s: float, tokens: float) -> float:
        """The pipeline bubble of one prompt or step: its last chunk (or micro-batch) still crosses the
        other pp − 1 stages after the first stage is done, each a stage time plus the activations' hop."""
        if self.pp == 1:
            return 0.0
        return (self.pp - 1) * (stage_s + self.stage_hop_s(tokens))

    def stage_hop_s(self, tokens: float) -> float:
        """Seconds to pass ``tokens`` tokens' activations (hidden × bf16) from one stage to the next, over
        the stage's NICs (the stages sit on different nodes)."""
        n_bytes = tokens * self.model.hidden * ACT_BYTES
        return CROSS_NODE_COLLECTIVE_LATENCY_S + n_bytes / (self.stage_tp * self.chip.nic_bytes_per_s)

    def prefill_chunk_parts(self, input_tokens: float, start: float, tokens: float) -> tuple[float, float]:
        """(work, memory bytes besides the weight read) of one prefill chunk of ``tokens`` new
        tokens at positions [start, start + tokens) of a prompt of ``input_tokens``.

        Work is in dense-GEMM FLOP-equivalents: each part's FLOPs × (dense rate / its rate), the
        elementwise kernels' seconds × dense rate. The GEMMs are costed at M = the forward's token
        budget (``prefill_chunk_tokens``): at saturation short prompts are packed into forwards up
        to it (placer.sim.prefill).
        """
        last = 1.0 if start + tokens >= input_tokens - 1e-9 else 0.0
        rows = max(tokens, self.prefill_chunk_tokens)
        work = self._linear_work(tokens, last, rows) + self._attn_work(start, start + tokens, prefill=True) \
            + self.elementwise_s(tokens) * self.flops_per_s  # FLOP-equivalents: they run between the GEMMs
        return work, input_tokens * self.kv_bytes_per_token

    def prefill_chunk_s(self, input_tokens: float, start: float, tokens: float) -> float:
        """Seconds of one prefill forward over one chunk (see :meth:`prefill_chunk_parts`)."""
        work, kv_bytes = self.prefill_chunk_parts(input_tokens, start, tokens)
        return self.forward_s(work, self.weight_bytes + kv_bytes, tokens)

    def forward_s(self, flops: float, mem_bytes: float, tokens: float) -> float:
        """Seconds of one prefill forward: ``flops`` dense-GEMM FLOP-equivalents, ``mem_bytes`` moved."""
        terms = self._forward_terms(flops, mem_bytes, tokens)
        return self._combine(terms) + PREFILL_CHUNK_OVERHEAD_S

    def _forward_terms(self, flops: float, mem_bytes: float, tokens: float) -> dict[str, float]:
        """Seconds of one forward — with pp stages, of one stage: each does 1/pp of the work and reads
        1/pp of the bytes on 1/pp of the chips, so compute and memory are the instance's; its group
        all-reduces for layers/pp only."""
        return {"compute": flops / self.flops_per_s, "memory": mem_bytes / self.mem_bw_bytes_per_s,
                "communication": self.comm_s(tokens, prefill=True) / self.pp}

    def _combine(self, terms: dict[str, float]) -> float:
        """MoE all-to-all overlaps compute (two micro-batches); TP all-reduce does not."""
        c, m, x = terms["compute"], terms["memory"], terms["communication"]
        if self.is_moe:
            return max(c, m, x)
        return max(c, m) + x

    # ---- decode ------------------------------------------------------------
    @cached_property
    def draft_tokens(self) -> int:
        """Draft positions verified per sequence and step: ⌈accept⌉ − 1."""
        return max(0, math.ceil(self.mtp_accept - 1e-9) - 1)

    def kv_read_bytes(self, context_tokens: float) -> float:
        """KV bytes one sequence reads per decode step."""
        topk = self.model.sparse_topk_tokens
        if not topk:
            return context_tokens * self.kv_bytes_per_token
        idx = self.model.indexer_bytes_per_token()
        return min(context_tokens, topk) * (self.kv_bytes_per_token - idx) + context_tokens * idx

    def _weights_read_bytes(self, tokens: float) -> float:
        """Weight bytes a forward over ``tokens`` tokens streams (experts only where touched)."""
        m = self.model
        if m.moe_layers and m.experts:
            touched = 1.0 - (1.0 - m.experts_per_token / m.experts) ** max(tokens, 1.0)
            embedding = m.embedding_params * self.bytes_per_param * self._replicas
            return self.weight_bytes - self.expert_params * self.bytes_per_param * (1 - touched) - embedding
        touched = 1.0 - (1.0 - m.active_fraction) ** max(tokens, 1.0)
        return (self.weight_bytes - m.embedding_params * self.bytes_per_param) * touched

    def decode_kernels(self, sequences: float, queries: float, context_tokens: float) -> dict:
        """The kinds of kernel of a decode forward, each (compute s, memory s), plus the
        communication seconds: ``linear`` (the GEMMs: their FLOPs, the weight read), ``attention``
        (its FLOPs, the KV read) and ``elementwise`` (norms, adds, activation: bytes only) for
        ``sequences`` sequences at ``context_tokens`` context computing ``queries`` new positions each."""
        tokens = sequences * queries
        attn = sequences * self._attn_work(context_tokens, context_tokens + queries, prefill=False)
        kv = sequences * self.kv_read_bytes(context_tokens + queries)
        return {"linear": (self._linear_work(tokens, tokens) / self.flops_per_s,
                           self._weights_read_bytes(tokens) / self.mem_bw_bytes_per_s),
                "attention": (attn / self.flops_per_s, kv / self.mem_bw_bytes_per_s),
                "elementwise": (0.0, self.elementwise_s(tokens)),
                "communication": self.comm_s(tokens)}

    def decode_terms(self, sequences: float, queries: float, context_tokens: float) -> dict[str, float]:
        """Compute / memory / communication seconds of a forward where each of ``sequences``
        sequences at ``context_tokens`` context computes ``queries`` new positions (the sums over
        its kernels, :meth:`decode_kernels`)."""
        return _totals(self.decode_kernels(sequences, queries, context_tokens))

    def _kernel_time(self, kernels: dict) -> float:
        """Seconds of a forward from its kernels: a roofline per kind of kernel, summed — the GEMMs,
        the attention and the elementwise kernels run one after the other in every layer, so the
        GEMMs' compute cannot hide the attention's KV read (the per-operator roofline of LLM-Viewer,
        Yuan et al. 2024, "LLM Inference Unveiled: Survey and Roofline Model Insights", arXiv
        2402.16363: each operator takes max(FLOPs / peak, bytes / bandwidth), the layer the sum).
        Communication as :meth:`_combine`: overlapped with MoE's two micro-batches, after the
        compute for TP."""
        work = sum(max(kernels[k]) for k in KERNEL_KINDS)
        x = kernels["communication"]
        return max(work, x) if self.is_moe else work + x

    def step_s(self, batch: float, context_tokens: float) -> float:
        """Seconds for one decode step of ``batch`` sequences of ``context_tokens`` each
        (each verifying 1 + :attr:`draft_tokens` positions)."""
        batch = max(batch, 1.0)
        if self.pp > 1:  # pp micro-batches of B/pp in flight; a token crosses every stage
            micro = batch / self.pp
            kernels = self.decode_kernels(micro, 1 + self.draft_tokens, context_tokens)
            stage = self._kernel_time({**kernels, "communication": kernels["communication"] / self.pp})
            return stage + self.pipeline_fill_s(stage, micro * (1 + self.draft_tokens)) + DECODE_STEP_OVERHEAD_S
        return self._kernel_time(self.decode_kernels(batch, 1 + self.draft_tokens, context_tokens)) \
            + DECODE_STEP_OVERHEAD_S

    def mixed_terms(self, batch: float, context_tokens: float, chunk_tokens: float,
                    chunk_start_tokens: float) -> dict[str, float]:
        """Compute / memory / communication seconds of one aggregated step (:meth:`mixed_kernels`, summed)."""
        return _totals(self.mixed_kernels(batch, context_tokens, chunk_tokens, chunk_start_tokens))

    def mixed_kernels(self, batch: float, context_tokens: float, chunk_tokens: float,
                      chunk_start_tokens: float) -> dict:
        """Compute / memory / communication seconds of one aggregated step: ``batch`` decode
        sequences at ``context_tokens`` (each 1 + :attr:`draft_tokens` positions) plus a prefill
        chunk of ``chunk_tokens`` prompt tokens at positions [start, start + chunk) in the same
        forward. The GEMMs run over all B(1 + d) + C rows at once (one weight read, g(M) at the
        joint M); the chunk adds its linear FLOPs, its attention over its prompt's prefix
        (prefill form) and the read of that prefix's KV; communication covers every row."""
        rows = batch * (1 + self.draft_tokens)
        if chunk_tokens <= 0:
            return self.decode_kernels(batch, 1 + self.draft_tokens, context_tokens)
        total = rows + chunk_tokens
        attn = (batch * self._attn_work(context_tokens, context_tokens + 1 + self.draft_tokens, prefill=False)
                + self._attn_work(chunk_start_tokens, chunk_start_tokens + chunk_tokens, prefill=True))
        kv = (batch * self.kv_read_bytes(context_tokens + 1 + self.draft_tokens)
              + (chunk_start_tokens + chunk_tokens) * self.kv_bytes_per_token)
        return {"linear": (self._linear_work(total, rows, total) / self.flops_per_s,
                           self._weights_read_bytes(total) / self.mem_bw_bytes_per_s),
                "attention": (attn / self.flops_per_s, kv / self.mem_bw_bytes_per_s),
                "elementwise": (0.0, self.elementwise_s(total)),
                "communication": self.comm_s(total)}

    def mixed_step_s(self, batch: float, context_tokens: float, chunk_tokens: float = 0.0,
                     chunk_start_tokens: float = 0.0) -> float:
        """Seconds of one aggregated step (:meth:`mixed_terms`); equals :meth:`step_s` without a chunk.

        The TPOT interference of chunked prefill, from first principles: a decode step at
        moderate B is memory bound (weights + KV read once per step), so a small chunk's FLOPs
        ride in the slack nearly free; once the chunk's GEMM work exceeds the memory time the
        step turns compute bound and every decoding sequence's TPOT grows with the chunk."""
        if chunk_tokens <= 0:
            return self.step_s(batch, context_tokens)
        kernels = self.mixed_kernels(max(batch, 1.0), context_tokens, chunk_tokens, chunk_start_tokens)
        return self._kernel_time(kernels) + DECODE_STEP_OVERHEAD_S

    def extend_s(self, tokens: int, context_tokens: float) -> float:
        """Seconds for one extend-decode pass over ``tokens`` given tokens (MD after a handoff)."""
        return self._kernel_time(self.decode_kernels(1, max(tokens, 1), context_tokens)) + DECODE_STEP_OVERHEAD_S

    def terms(self, phase: str, *args: float) -> dict[str, float]:
        """The compute / memory / communication seconds behind a time:
        ``terms("prefill", input_tokens, start, tokens)`` for one chunk,
        ``terms("decode", batch, context_tokens)`` for one step."""
        if phase == "prefill":
            input_tokens, start, tokens = args
            work, kv = self.prefill_chunk_parts(input_tokens, start, tokens)
            return self._forward_terms(work, self.weight_bytes + kv, tokens)
        batch, context = args
        return self.decode_terms(max(batch, 1.0), 1 + self.draft_tokens, context)

    def max_batch(self, context_tokens: float, tpot_s: float, resident_tokens: float | None = None,
                  chunk_tokens: float = 0.0, chunk_start_tokens: float = 0.0) -> int:
        """Largest batch whose time per token (step / accept) meets ``tpot_s`` and whose KV fits (0 if
        none). With ``chunk_tokens`` (aggregated instances) every step also carries a prefill chunk at
        ``chunk_start_tokens`` (:meth:`mixed_step_s`) and memory keeps room for that prompt's KV."""
        resident = resident_tokens if resident_tokens is not None else context_tokens
        prompt = chunk_start_tokens + chunk_tokens if chunk_tokens > 0 else 0.0
        by_memory = int(max(0.0, self.kv_capacity_tokens - prompt) // max(resident, 1.0))
        hi = min(self.batch_cap, by_memory)

        def meets(b: int) -> bool:
            return self.mixed_step_s(b, context_tokens, chunk_tokens, chunk_start_tokens) / self.mtp_accept <= tpot_s

        if hi < 1 or not meets(1):
            return 0
        lo = 1
        while lo < hi:  # step time grows with batch: bisect
            mid = (lo + hi + 1) // 2
            if meets(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def rdma_s(self, n_bytes: float, peer: InstanceModel | None = None) -> float:
        """Seconds to move ``n_bytes`` of KV to a peer in the same datacenter."""
        bw = self.rdma_bytes_per_s if peer is None else min(self.rdma_bytes_per_s, peer.rdma_bytes_per_s)
        return n_bytes / bw + RDMA_LATENCY_S


def _totals(kernels: dict) -> dict[str, float]:
    """Compute / memory / communication seconds summed over a forward's kinds of kernel."""
    return {"compute": sum(kernels[k][0] for k in KERNEL_KINDS),
            "memory": sum(kernels[k][1] for k in KERNEL_KINDS),
            "communication": kernels["communication"]}


def pipeline_stages(model: ModelConfig, chips: int, enabled: bool) -> int:
    """Pipeline stages of an instance of ``chips`` chips: with pipeline parallelism ``enabled``, a dense
    model on more chips than one scale-up domain runs one stage per domain (tensor parallel inside the
    node over NVLink, activations between nodes) instead of tensor parallel across nodes; else 1.
    MoE models keep one stage (expert parallel spans nodes)."""
    dense = model.params_active_b >= model.params_total_b
    if enabled and dense and chips > SCALEUP_DOMAIN_CHIPS and chips % SCALEUP_DOMAIN_CHIPS == 0:
        return chips // SCALEUP_DOMAIN_CHIPS
    return 1
