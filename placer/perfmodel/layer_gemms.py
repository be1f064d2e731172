"""The GEMMs of one transformer layer on one rank, by their real shapes (issue 41, part 2).

in:  a :class:`~placer.catalog.ModelConfig`, the tensor-parallel degree ``t`` of attention and the dense
     layers (1 with data-parallel attention), the pipeline stages, the dense FFN width and the dense
     parameters per token (:class:`~placer.perfmodel.work.InstanceWork`)
out: :func:`layer_gemms` → ((layers per stage, ((name, n, k), ...)), ...), one entry per group of
     identical layers; a GEMM of m rows is (m × k) @ (k × n)

* GQA  QKV (n = (q + 2·kv)·head_dim / t, k = hidden), O (n = hidden, k = q·head_dim / t);
* MLA  qkv_a: the query and latent down-projections fused into one GEMM, as the engines run them
  (n = 1536 + r_kv + rope, k = hidden: TensorRT-LLM's "Fuse_A_GEMM", SGLang's and vLLM's
  ``fused_qkv_a_proj``), q_b (n = H·(d + rope) / t, k = 1536), kv_b (n = H·2d / t, k = r_kv: the latent's up-projection over the new tokens in
  prefill; in decode the same weights as the absorbed per-head BMMs), O (n = hidden, k = H·d / t); the
  tables' MLA attention kernels time the attention core. q_lora_rank 1536 is DeepSeek-V3's and Kimi-K2's (the catalog's
  MLA models; ModelConfig does not carry it);
* FFN  gate/up (n = 2f / t, k = hidden), down (n = hidden, k = f / t): dense models f from the
  parameter count; MoE models the shared experts (f = shared × expert_ffn) in MoE layers and, in the
  other layers, the dense FFN the parameters left after attention and shared experts imply.
"""

from __future__ import annotations

from placer.catalog import ModelConfig

#: MLA's query down-projection rank (DeepSeek-V3 / Kimi-K2 config.json ``q_lora_rank``)
MLA_Q_LORA_RANK = 1536

Gemms = tuple[tuple[str, float, float], ...]

#: MLA's latent projections, left unquantized (bf16) in an NVFP4 checkpoint: NVIDIA's NVFP4 DeepSeek-R1
#: checkpoints quantize the dense and expert FFNs and keep the attention modules in bf16 (TensorRT-LLM
#: tech blog 1, "Precision Strategy": "64x Attention Modules bf16", "Dense FFN / MoE FFN nvfp4"); their
#: -v2 releases, the ones TensorRT-LLM's performance overview serves, "additionally quantize the wo
#: module" (model cards of nvidia/DeepSeek-R1-FP4-v2, -0528-FP4-v2), so O stays FP4
FP4_UNQUANTIZED = frozenset({"qkv_a", "q_b", "kv_b"})


def layer_gemms(m: ModelConfig, t: int, pp: int, ffn_width: float, dense_params: float) -> tuple[tuple[float, Gemms], ...]:
    """(layers per stage, ((name, n, k), ...)) for each group of identical layers, per rank."""
    per_stage = 1.0 / pp
    if m.attn == "mla":
        h, d, r = m.q_heads, m.head_dim, m.kv_lora_rank
        attn: Gemms = (("qkv_a", MLA_Q_LORA_RANK + r + m.rope_dim, m.hidden),
                       ("q_b", h * (d + m.rope_dim) / t, MLA_Q_LORA_RANK), ("kv_b", h * 2 * d / t, r),
                       ("o", m.hidden, h * d / t))
        attn_params = m.hidden * (MLA_Q_LORA_RANK + r + m.rope_dim) + MLA_Q_LORA_RANK * h * (d + m.rope_dim) \
            + r * h * 2 * d + h * d * m.hidden
    else:
        attn = (("qkv", (m.q_heads + 2 * m.kv_heads) * m.head_dim / t, m.hidden),
                ("o", m.hidden, m.q_heads * m.head_dim / t))
        attn_params = m.hidden * m.head_dim * (2 * m.q_heads + 2 * m.kv_heads)

    def ffn(width: float) -> Gemms:
        return (("gate_up", 2 * width / t, m.hidden), ("down", m.hidden, width / t)) if width > 0 else ()

    if not (m.moe_layers and m.experts):
        return ((m.layers * per_stage, attn + ffn(ffn_width)),)
    shared = m.shared_experts * m.expert_ffn
    dense_layers = m.layers - m.moe_layers
    groups = [(m.moe_layers * per_stage, attn + ffn(shared))]
    if dense_layers > 0:
        left = dense_params - m.layers * attn_params - m.moe_layers * 3 * m.hidden * shared
        groups.append((dense_layers * per_stage, attn + ffn(max(0.0, left / (dense_layers * 3 * m.hidden)))))
    return tuple(groups)
