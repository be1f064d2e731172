"""The performance model's constants, each with its source, and the GEMM tile efficiency g(M)
(:mod:`placer.perfmodel` holds the formulation they enter)."""

from __future__ import annotations

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
