"""Performance model: roofline on the four chip dimensions × efficiency, per kind of work.

in:  a :class:`~placer.catalog.Chip`, a tensor-parallel degree, a
     :class:`~placer.catalog.ModelConfig`, dtypes, MTP's accepted tokens per step
out: seconds and bytes: prefill time, decode step time, largest batch, transfer
     times, extend-decode cost, and the compute / memory / communication terms behind
     each time (:meth:`InstanceModel.terms`). Waiting times are not here: the M/G/1 law
     at P is :class:`placer.queueing.WaitModel`, the packing of short prompts
     :func:`placer.p_queues.packed_wait_law`, and the simulator (placer.sim) measures both.

The package, one layer per module, each a class the next extends:

* :mod:`~placer.perfmodel.constants` — the constants (each with its source) and g(M);
* :mod:`~placer.perfmodel.resources` — what an instance holds and its sustained rates
  (:class:`InstanceResources`), the pipeline-stage rule (:func:`pipeline_stages`);
* :mod:`~placer.perfmodel.collectives` — all-reduce, expert-parallel all-to-all, the pipeline
  hop and bubble, RDMA of KV;
* :mod:`~placer.perfmodel.work` — the FLOPs and bytes of a forward per kind of kernel;
* :mod:`~placer.perfmodel.instance` — :class:`InstanceModel`: the times (prefill, decode step,
  aggregated step, extend) and the largest batch.

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
* Transfer of b bytes: b / bandwidth + latency (RDMA: tp × NIC, the slower end's; WAN:
  the line's share, see :func:`placer.queueing.wan_transfer_s`).
"""

from placer.perfmodel.constants import (
    ACT_BYTES, COLLECTIVE_LATENCY_S, CROSS_NODE_COLLECTIVE_LATENCY_S, DECODE_STEP_OVERHEAD_S,
    EP_COMM_SM_FRACTION, EXPERT_LOAD_BALANCE, FP8_SCALE_GROUP, GEMM_TILE_M, KERNEL_KINDS,
    KERNEL_LAUNCH_S, MAX_BATCH_PER_CHIP, MOE_ROUTED_EXPERTS, NCCL_NET_HOP_S, NCCL_NVLINK_HOP_S,
    NCCL_RING_BASE_S, PREFILL_CHUNK_OVERHEAD_S, RDMA_LATENCY_S, SCALEUP_DOMAIN_CHIPS,
    USABLE_MEM_FRACTION, gemm_efficiency,
)
from placer.perfmodel.instance import PREFILL_MEMO_ENTRIES, InstanceModel
from placer.perfmodel.resources import InstanceResources, pipeline_stages

__all__ = [
    "ACT_BYTES", "COLLECTIVE_LATENCY_S", "CROSS_NODE_COLLECTIVE_LATENCY_S", "DECODE_STEP_OVERHEAD_S",
    "EP_COMM_SM_FRACTION", "EXPERT_LOAD_BALANCE", "FP8_SCALE_GROUP", "GEMM_TILE_M", "KERNEL_KINDS",
    "KERNEL_LAUNCH_S", "MAX_BATCH_PER_CHIP", "MOE_ROUTED_EXPERTS", "NCCL_NET_HOP_S", "NCCL_NVLINK_HOP_S",
    "NCCL_RING_BASE_S", "PREFILL_CHUNK_OVERHEAD_S", "PREFILL_MEMO_ENTRIES", "RDMA_LATENCY_S",
    "SCALEUP_DOMAIN_CHIPS", "USABLE_MEM_FRACTION", "InstanceModel", "InstanceResources", "gemm_efficiency",
    "pipeline_stages",
]
