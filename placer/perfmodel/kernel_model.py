"""A forward composed from an engine's measured kernels: every GEMM, attention, grouped-expert and
all-reduce call of a prefill chunk or a decode step, per rank, from :class:`~placer.perfmodel.op_costs.OpCosts`.

in:  an instance model (:class:`~placer.perfmodel.InstanceModel` or a shape's subclass) and the
     chip's op costs under one engine
out: :class:`KernelForward`, a mixin whose subclass of the instance's own class answers the same
     methods (``prefill_chunk_s``, ``step_s``, ``mixed_step_s``, ``extend_s``, ``terms``,
     ``max_batch``) from the measured kernels; ``source_of_prefill`` / ``source_of_step`` name what
     was measured and what fell back to the roofline.

The calls of one layer on one rank (t = tensor-parallel degree of attention: the stage's chips, or 1
with data-parallel attention; rows per rank m = forward rows / d, d = the data-parallel ranks):

* the GEMMs of each layer by their real shapes and dtypes (:mod:`~placer.perfmodel.layer_gemms`: QKV / O
  or MLA's fused and bf16-in-NVFP4 projections, the FFN or shared experts, each split over t);
* routed experts: the grouped expert GEMMs of one MoE layer, ``moe_s`` over the group's tokens:
  with data-parallel attention (``dep``) experts split ep = chips ways; with tensor-parallel attention
  (MoE shape ``tp``) every expert tensor parallel over the chips (moe_tp = chips, ep 1), as the engines
  run ``--tp-size N`` without expert parallelism, each MoE layer's output then all-reduced (no
  all-to-all, not overlapped);
* attention: GQA by phase, batch, context, KV dtype; MLA in its prefill and decode forms;
* all-reduce: the engine's own (or NCCL's) by message size and GPU count.

The LM head (n = vocab / t, k = hidden) runs for sampled rows only. A GEMM in a prefill forward is
costed at the forward's rows (the token budget short prompts are packed into, as the roofline does)
and charged pro rata to the chunk's tokens. Decode with speculative positions (q > 1 per sequence)
reads each sequence's KV once: the measured one-query step × the roofline's q-query / one-query ratio.

Left to the roofline, and said so: the elementwise kernels (norms, residual adds, activation), the
expert-parallel all-to-all (overlapped with compute as the roofline has it), sparse attention (DSA),
collectives across nodes, and any op whose shape lies outside what was measured. The framework's
fixed cost per forward stays :data:`~placer.perfmodel.constants.DECODE_STEP_OVERHEAD_S` /
:data:`~placer.perfmodel.constants.PREFILL_CHUNK_OVERHEAD_S`.
"""

from __future__ import annotations

from functools import cached_property

from placer.catalog import KV_PRECISIONS, WEIGHT_PRECISIONS
from placer.perfmodel.collectives import InstanceCollectives
from placer.perfmodel.constants import ACT_BYTES, KERNEL_KINDS, gemm_efficiency
from placer.perfmodel.layer_gemms import FP4_UNQUANTIZED, layer_gemms
from placer.perfmodel.op_costs import OpCosts

#: composed forwards kept per instance (decode kernels by (sequences, queries, context); prefill chunks)
FORWARD_MEMO_ENTRIES = 8192
#: query positions per sequence from which a decode forward is costed as prefill attention over the
#: context (extend-decode after a handoff), not as a decode step
EXTEND_QUERIES = 16
#: kinds of op a source names, in order
OP_NAMES = ("gemm", "moe", "attention", "allreduce", "elementwise", "alltoall")


class KernelForward:
    """Mixin: an instance model whose forwards are composed from measured kernels (``ops``)."""

    ops: OpCosts

    # ---- the instance's layout per rank ---------------------------------------------------
    @cached_property
    def _attn_tp(self) -> int:
        """Tensor-parallel degree of attention and the dense GEMMs (1 with data-parallel attention)."""
        return 1 if self._replicas > 1 else self.stage_tp

    @cached_property
    def _dp(self) -> int:
        """Ranks that split a forward's tokens (data-parallel attention), else 1."""
        return self.tp if self._replicas > 1 else 1

    @cached_property
    def _experts_tp(self) -> int:
        """Tensor-parallel degree of the routed experts: the chips with tensor-parallel attention (shape
        ``tp`` of an MoE model: the engines' default without expert parallelism — SGLang ``--tp-size N``,
        vLLM ``--tensor-parallel-size N`` as ``placer export`` launches it — shards every expert over the
        chips), 1 with data-parallel attention (``dep``: experts expert parallel)."""
        return self.tp if self.is_moe and self._replicas == 1 else 1

    def _kernel_time(self, kernels: dict) -> float:
        """As the roofline's, but with experts tensor parallel the all-reduces are not overlapped."""
        if self._experts_tp > 1:
            return sum(max(kernels[k]) for k in KERNEL_KINDS) + kernels["communication"]
        return super()._kernel_time(kernels)

    def _combine(self, terms: dict[str, float]) -> float:
        if self._experts_tp > 1:
            return max(terms["compute"], terms["memory"]) + terms["communication"]
        return super()._combine(terms)

    @cached_property
    def _gemm_dtype(self) -> str | None:
        """The tables' GEMM dtype for the weights (None: weight-only int8/int4, no table: roofline).
        FP8 weights of a model whose published FP8 checkpoint is block-scaled (128×128: DeepSeek, Kimi,
        Qwen3's -FP8 releases; :attr:`~placer.catalog.ModelConfig.fp8_block_checkpoint`) run block-FP8
        GEMMs, other FP8 per-tensor ones."""
        w = self.weight_dtype
        if w == "bf16":
            return "bf16"
        if w == "fp8" and self.compute_dtype == "fp8":
            return "fp8_block" if self.model.fp8_block_checkpoint else "fp8"
        if WEIGHT_PRECISIONS[w].compute == "fp4" and self.compute_dtype == "fp4":
            return "fp4"
        return None

    @cached_property
    def _layer_groups(self) -> tuple:
        """(layers per stage, ((name, n, k), ...)) per group of identical layers, per rank (:mod:`layer_gemms`)."""
        return layer_gemms(self.model, self._attn_tp, self.pp, self.ffn_width, self._params[0])

    # ---- one op ----------------------------------------------------------------------------
    def _gemm(self, rows: float, n: float, k: float, seen: dict, name: str = "") -> tuple[float, float, float]:
        """(seconds, roofline compute s, roofline memory s) of one GEMM ``name`` of ``rows`` rows on one rank."""
        rows = max(rows, 1.0)
        flops = 2 * rows * n * k
        dtype = self._gemm_dtype
        compute_dtype, w_bytes = self.compute_dtype, n * k * self.bytes_per_param
        if dtype == "fp4" and self.model.attn == "mla" and name in FP4_UNQUANTIZED:
            dtype, compute_dtype, w_bytes = "bf16", "bf16", n * k * WEIGHT_PRECISIONS["bf16"].bytes_per_value
        compute = flops / (self.chip.flops_per_s(compute_dtype) * gemm_efficiency(rows))
        memory = (w_bytes + ACT_BYTES * rows * (n + k)) / self.chip.mem_bw_bytes_per_s
        if dtype is None:
            seen.setdefault("gemm", set()).add(False)
            return max(compute, memory), compute, memory
        seconds, measured = self.ops.seconds("gemm", (dtype, rows, round(n), round(k)), max(compute, memory),
                                             flops, w_bytes + ACT_BYTES * rows * (n + k), compute_dtype)
        seen.setdefault("gemm", set()).add(measured)
        return seconds, compute, memory

    def _linear(self, tokens: float, logits: float, rows: float, seen: dict) -> tuple[float, float]:
        """(seconds, roofline share compute − memory) of a forward's GEMMs over ``tokens`` tokens in a
        forward of ``rows`` rows, ``logits`` LM-head rows: dense GEMMs, routed experts, LM head."""
        per_rank = rows / self._dp
        scale = tokens / rows if rows > 0 else 0.0
        total = lean = 0.0
        for layers, gemms in self._layer_groups:
            for name, n, k in gemms:
                s, c, mem = self._gemm(per_rank, n, k, seen, name)
                total += layers * s * scale
                lean += layers * (c - mem) * scale
        total += self._routed(tokens, rows, seen)
        m = self.model
        if logits > 0 and m.vocab:
            lm_t = self._attn_tp
            s, c, mem = self._gemm(logits / self._dp, m.vocab / lm_t, m.hidden, seen)
            total += s  # once per forward (the last stage's)
            lean += c - mem
        return total, lean

    def _routed(self, tokens: float, rows: float, seen: dict) -> float:
        """Seconds of the routed experts over ``tokens`` tokens in a forward of ``rows`` rows (all MoE
        layers; on every rank at once)."""
        m = self.model
        if not (m.moe_layers and m.experts and self._params[1]):
            return 0.0
        roofline = self.routed_expert_work(tokens, rows) / self.flops_per_s
        dtype = {"bf16": "bf16", "fp8": "fp8_block" if m.fp8_block_checkpoint else "fp8",
                 "fp4": "fp4"}.get(self.compute_dtype) if self._gemm_dtype else None
        if dtype is None:
            seen.setdefault("moe", set()).add(False)
            return roofline  # the caller's roofline forward answers when nothing was measured
        ep = self.tp // self._experts_tp
        flops = 2 * rows * m.experts_per_token * 3 * m.hidden * m.expert_ffn / self.tp  # per rank, either split
        touched = 1.0 - (1.0 - m.experts_per_token / m.experts) ** max(rows, 1.0)
        w_bytes = touched * m.experts / self.tp * 3 * m.hidden * m.expert_ffn * self.bytes_per_param
        # the roofline of one layer's experts on one rank: their FLOPs, or the read of the experts touched
        per_layer = max(roofline / m.moe_layers * (rows / tokens if tokens > 0 else 1.0),
                        w_bytes / self.chip.mem_bw_bytes_per_s)
        s, measured = self.ops.seconds("moe", (dtype, max(rows, 1.0), m.hidden, m.expert_ffn, m.experts_per_token,
                                               m.experts, self._experts_tp, ep), per_layer, flops, w_bytes,
                                        self.compute_dtype)
        seen.setdefault("moe", set()).add(measured)
        return s * m.moe_layers * (tokens / rows if rows > 0 else 0.0)

    def _attention(self, sequences: float, start: float, queries: float, prefill: bool, seen: dict) -> float:
        """Seconds of attention (all layers of a stage) for ``sequences`` sequences each computing
        ``queries`` positions after ``start`` cached ones."""
        m = self.model
        pf = prefill or queries >= EXTEND_QUERIES
        roofline = max(self.attn_work_s(sequences, start, queries, pf))
        if m.sparse_topk_tokens or m.attn not in ("gqa", "mla"):
            seen.setdefault("attention", set()).add(False)
            return roofline
        t, layers = self._attn_tp, m.layers / self.pp
        kv = self.kv_dtype if self.kv_dtype in ("bf16", "fp8") else None
        per_rank = sequences / self._dp
        if kv is None or sequences <= 0:
            seen.setdefault("attention", set()).add(False)
            return roofline
        # under one sequence per rank (a prompt's prefill with data-parallel attention): one rank's
        # sequence, its share of the ranks' time — the pooled rate, as the roofline has it
        one = self._attention_call(max(per_rank, 1.0), start, queries, pf, kv, t)
        if one is not None and per_rank < 1.0:
            one *= per_rank
        if one is None:
            seen.setdefault("attention", set()).add(False)
            return roofline
        seen.setdefault("attention", set()).add(True)
        if not pf and queries > 1:  # speculative positions: the roofline's q-query / one-query ratio
            base = max(self.attn_work_s(sequences, start, 1, False))
            one *= roofline / base if base > 0 else 1.0
        return one * layers

    def _attention_call(self, batch: float, start: float, queries: float, prefill: bool, kv: str,
                        t: int) -> float | None:
        """One layer's attention on one rank from the tables (None: not measured)."""
        m = self.model
        heads, kv_heads = m.q_heads / t, max(1.0, m.kv_heads / t)
        # FLOPs and bytes of the call timed, for the transfer (one decode query; MLA prefill: no prefix)
        timed = queries if prefill else 1.0
        past = 0.0 if prefill and m.attn == "mla" else start
        flops = batch * self._attn_work(past, past + timed, prefill) * self.attn_flops_per_s / self.flops_per_s \
            / (m.layers * t)
        bytes_ = batch * (past + timed) * m.kv_bytes_per_token_per_layer(kv) * kv_heads / max(m.kv_heads, 1)
        args: tuple
        if m.attn == "gqa":
            family = "context_attention" if prefill else "generation_attention"
            args = (batch, queries, heads, kv_heads, m.head_dim, kv, start) if prefill else \
                (batch, start + 1, heads, kv_heads, m.head_dim, kv)
        else:
            family = "context_mla" if prefill else "generation_mla"
            args = (batch, queries, m.q_heads, kv, t) if prefill else (batch, start + 1, m.q_heads, kv, t)
        s = self.ops.measured_s(family, args, flops, bytes_, KV_PRECISIONS[self.kv_dtype].compute)
        if s is not None and m.attn == "mla" and prefill and start > 0:
            # the table's prefill has no cached prefix: scale by the roofline with / without it
            fresh = max(self.attn_work_s(batch * self._dp, 0.0, queries, True))
            s *= max(self.attn_work_s(batch * self._dp, start, queries, True)) / fresh if fresh > 0 else 1.0
        return s

    def attn_work_s(self, sequences: float, start: float, queries: float, prefill: bool) -> tuple[float, float]:
        """The roofline's (compute s, memory s) of attention for ``sequences`` sequences each computing
        ``queries`` positions after ``start`` (the instance's pooled rates, all layers of a stage)."""
        flops = sequences * self._attn_work(start, start + queries, prefill=prefill)
        kv = sequences * (self.kv_read_bytes(start + queries) if not prefill else (start + queries) * self.kv_bytes_per_token)
        return flops / self.flops_per_s, kv / self.mem_bw_bytes_per_s

    def allreduce_s(self, n_bytes: float) -> float:
        """One all-reduce of ``n_bytes`` over the stage's chips: the engine's measured all-reduce inside
        a node, the roofline's ring across nodes or outside what was measured."""
        roofline = super().allreduce_s(n_bytes)
        if self._nodes > 1:
            self._comm_seen.setdefault("allreduce", set()).add(False)
            return roofline
        s, measured = self.ops.seconds("allreduce", ("bf16", self.stage_tp, n_bytes), roofline, 0.0, n_bytes,
                                       "bf16", self.stage_tp)
        self._comm_seen.setdefault("allreduce", set()).add(measured)
        return s

    def comm_s(self, tokens: float, prefill: bool = False) -> float:
        """Communication seconds of one forward: the roofline's, with the expert-parallel dispatch and
        combine of every MoE layer from the engine's measured all-to-all where it covers the layout
        (tokens per rank, hidden, top-k, experts, ep = chips)."""
        total = super().comm_s(tokens, prefill)
        m = self.model
        if not (self.is_moe and self.tp > 1 and m.moe_layers and m.experts and m.experts_per_token):
            return total
        roofline = InstanceCollectives.comm_s(self, tokens, prefill)  # the expert all-to-all part of ``total``
        if self._experts_tp > 1:  # experts tensor parallel: each MoE layer's output all-reduced, no all-to-all
            return total - roofline + m.moe_layers * self.allreduce_s(tokens * m.hidden * ACT_BYTES)
        per_rank = max(tokens / self.tp, 1.0)
        layer_bytes = per_rank * m.experts_per_token * m.hidden * 2 * ACT_BYTES
        parts = [self.ops.measured_s("alltoall", (phase, per_rank, m.hidden, m.experts_per_token, m.experts, self.tp,
                                                  "bf16"), 0.0, layer_bytes / 2, "bf16", self.tp)
                 for phase in ("dispatch", "combine")]
        measured = all(p is not None for p in parts)
        self._comm_seen.setdefault("alltoall", set()).add(measured)
        if not measured:
            return total
        return total - roofline + m.moe_layers * sum(parts)

    @cached_property
    def _comm_seen(self) -> dict:
        return {}

    # ---- forwards ----------------------------------------------------------------------------
    @cached_property
    def _forward_memo(self) -> dict:
        return {}

    def _memo(self, key: tuple, build):
        memo = self._forward_memo
        hit = memo.get(key)
        if hit is None:
            hit = build()
            if len(memo) < FORWARD_MEMO_ENTRIES:
                memo[key] = hit
        return hit

    def _kinds(self, linear: tuple[float, float], attention: float, attn_lean: float, tokens: float,
               comm: float) -> dict:
        """A forward's kinds of kernel as (compute s, memory s): a measured time sits on the side its
        roofline leans to (so :meth:`_kernel_time` — the sum over kinds of max — adds it once)."""
        lin, lean = linear
        return {"linear": (lin, 0.0) if lean >= 0 else (0.0, lin),
                "attention": (attention, 0.0) if attn_lean >= 0 else (0.0, attention),
                "elementwise": (0.0, self.elementwise_s(tokens)), "communication": comm}

    def _decode(self, sequences: float, queries: float, context_tokens: float) -> tuple[dict, dict]:
        seen: dict = {}
        tokens = sequences * queries
        linear = self._linear(tokens, tokens, tokens, seen)
        attention = self._attention(sequences, context_tokens, queries, False, seen)
        c, mem = self.attn_work_s(sequences, context_tokens, queries, queries >= EXTEND_QUERIES)
        self._comm_seen.clear()
        comm = self.comm_s(tokens)
        seen.update(self._comm_seen)
        return self._kinds(linear, attention, c - mem, tokens, comm), seen

    def _or_roofline(self, composed: tuple[dict, dict], roofline) -> tuple[dict, dict]:
        """The composed forward, or — where no table answered any of its ops — the roofline's own
        (so a forward whose source is "roofline" has the roofline's figures exactly)."""
        kinds, seen = composed
        if any(True in answers for answers in seen.values()):
            return composed
        return roofline(), seen

    def _decode_entry(self, sequences: float, queries: float, context_tokens: float) -> tuple[dict, dict]:
        return self._memo(("d", sequences, queries, context_tokens), lambda: self._or_roofline(
            self._decode(sequences, queries, context_tokens),
            lambda: super(KernelForward, self).decode_kernels(sequences, queries, context_tokens)))

    def decode_kernels(self, sequences: float, queries: float, context_tokens: float) -> dict:
        return self._decode_entry(sequences, queries, context_tokens)[0]

    def _mixed(self, batch: float, context_tokens: float, chunk_tokens: float, chunk_start: float) -> tuple[dict, dict]:
        seen: dict = {}
        q = 1 + self.draft_tokens
        rows = batch * q
        total = rows + chunk_tokens
        linear = self._linear(total, rows, total, seen)
        attention = self._attention(batch, context_tokens, q, False, seen) \
            + self._attention(1.0, chunk_start, chunk_tokens, True, seen)
        c, mem = self.attn_work_s(batch, context_tokens, q, False)
        c2, mem2 = self.attn_work_s(1.0, chunk_start, chunk_tokens, True)
        self._comm_seen.clear()
        comm = self.comm_s(total)
        seen.update(self._comm_seen)
        return self._kinds(linear, attention, c + c2 - mem - mem2, total, comm), seen

    def mixed_kernels(self, batch: float, context_tokens: float, chunk_tokens: float, chunk_start_tokens: float) -> dict:
        if chunk_tokens <= 0:
            return self.decode_kernels(batch, 1 + self.draft_tokens, context_tokens)
        return self._memo(("m", batch, context_tokens, chunk_tokens, chunk_start_tokens), lambda: self._or_roofline(
            self._mixed(batch, context_tokens, chunk_tokens, chunk_start_tokens),
            lambda: super(KernelForward, self).mixed_kernels(batch, context_tokens, chunk_tokens, chunk_start_tokens)))[0]

    def _prefill(self, input_tokens: float, start: float, tokens: float) -> tuple[dict, dict]:
        seen: dict = {}
        last = 1.0 if start + tokens >= input_tokens - 1e-9 else 0.0
        rows = max(tokens, self.prefill_chunk_tokens)
        linear = self._linear(tokens, last, rows, seen)
        attention = self._attention(1.0, start, tokens, True, seen)
        c, mem = self.attn_work_s(1.0, start, tokens, True)
        self._comm_seen.clear()
        comm = self.comm_s(tokens, prefill=True) / self.pp
        seen.update(self._comm_seen)
        return self._kinds(linear, attention, c - mem, tokens, comm), seen

    def _prefill_entry(self, input_tokens: float, start: float, tokens: float) -> tuple[dict, dict]:
        return self._memo(("p", input_tokens, start, tokens), lambda: self._prefill(input_tokens, start, tokens))

    def prefill_kernels(self, input_tokens: float, start: float, tokens: float) -> dict:
        """One prefill chunk's kinds of kernel (as :meth:`decode_kernels`; with pp, one stage's)."""
        return self._prefill_entry(input_tokens, start, tokens)[0]

    def prefill_chunk_parts(self, input_tokens: float, start: float, tokens: float) -> tuple[float, float]:
        """(work, memory bytes besides the weight read) of one prefill chunk, as the roofline's
        (:meth:`~placer.perfmodel.work.InstanceWork.prefill_chunk_parts`) but with the work the measured
        kernels' seconds in dense-GEMM FLOP-equivalents (seconds × the dense rate, as the roofline counts
        its elementwise kernels): :meth:`forward_s` then adds the communication and the overhead, floors
        a tail chunk at one weight read, and a packed forward of k prompts is k × this work — every caller
        of the roofline's prefill (``prefill_chunk_s``, the estimate's and the simulator's packing) reads
        the kernels."""
        kinds, seen = self._prefill_entry(input_tokens, start, tokens)
        if not any(True in answers for answers in seen.values()):  # no table answered: the roofline's own
            return super().prefill_chunk_parts(input_tokens, start, tokens)
        seconds = sum(max(kinds[k]) for k in KERNEL_KINDS)
        return seconds * self.flops_per_s, input_tokens * self.kv_bytes_per_token

    # ---- where the answer comes from ---------------------------------------------------------
    def _source(self, seen: dict) -> str:
        measured = [op for op in OP_NAMES if seen.get(op) == {True}]
        partly = [f"{op} (partly)" for op in OP_NAMES if seen.get(op) == {True, False}]
        roofline = [op for op in OP_NAMES if seen.get(op) == {False}]
        roofline.append("elementwise")
        if not measured and not partly:
            # the engine's layout still holds: MoE shape tp runs its experts tensor parallel
            return "roofline (experts tensor parallel, as the engine runs them)" if self._experts_tp > 1 else "roofline"
        return f"{self.ops.label}: {', '.join(measured + partly)}; roofline: {', '.join(roofline)}"

    def source_of_prefill(self, start: float, tokens: float) -> str:
        """What answered the forward of ``tokens`` new tokens after ``start`` cached: e.g.
        "measured kernels (vllm 0.24.0, h200_sxm): gemm, attention, allreduce; roofline: elementwise"."""
        return self._source(self._prefill_entry(start + tokens, start, tokens)[1])

    def source_of_step(self, batch: float, context_tokens: float) -> str:
        """What answered the decode step of ``batch`` sequences at ``context_tokens`` (as :meth:`source_of_prefill`)."""
        q = 1 + self.draft_tokens
        batch = max(batch, 1.0)
        return self._source(self._decode_entry(batch, q, context_tokens)[1])
