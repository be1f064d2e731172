"""The work of a forward, per kind of kernel: FLOPs of the GEMMs (dense, routed experts, LM head) and
of attention, bytes of the weight read, the KV read and the elementwise kernels (formulas:
:mod:`placer.perfmodel`).

in:  an instance (:class:`~placer.perfmodel.collectives.InstanceCollectives`), tokens and positions
out: dense-GEMM FLOP-equivalents, bytes, and a forward's kernels as (compute s, memory s) per kind
     (:data:`~placer.perfmodel.constants.KERNEL_KINDS`) plus its communication seconds
"""

from __future__ import annotations

import math
from functools import cached_property

from placer.perfmodel.collectives import InstanceCollectives
from placer.perfmodel.constants import ACT_BYTES, gemm_efficiency


class InstanceWork(InstanceCollectives):
    """An instance's work per forward (the third layer of :class:`~placer.perfmodel.InstanceModel`)."""

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
        (:mod:`placer.perfmodel`): layers × (10·hidden·copies + 3·f) × 2 B per token, copies = the tensor-parallel
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

    # ---- decode: draft positions, the bytes a step reads ------------------
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
