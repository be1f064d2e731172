"""The times of an instance: prefill, decode step, aggregated step (decode + a prefill chunk),
extend-decode, the compute / memory / communication terms behind each, and the largest batch that
meets a TPOT (formulas: :mod:`placer.perfmodel`).

in:  an instance's work per kernel (:class:`~placer.perfmodel.work.InstanceWork`), a request's tokens,
     a batch, a context, a TPOT
out: seconds, terms, a batch size
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from placer.perfmodel.constants import DECODE_STEP_OVERHEAD_S, KERNEL_KINDS, PREFILL_CHUNK_OVERHEAD_S
from placer.perfmodel.work import InstanceWork

#: Most (input tokens, hit rate) pairs an instance keeps its prefill seconds for (:meth:`InstanceModel.prefill_s`).
PREFILL_MEMO_ENTRIES = 4096


@dataclass(frozen=True)
class InstanceModel(InstanceWork):
    """Timing and memory of one instance: ``tp`` chips of ``chip`` serving ``model``."""

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

    def mixed_step_s(self, batch: float, context_tokens: float, chunk_tokens: float = 0.0,
                     chunk_start_tokens: float = 0.0) -> float:
        """Seconds of one aggregated step (:meth:`mixed_kernels`); equals :meth:`step_s` without a chunk.

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


def _totals(kernels: dict) -> dict[str, float]:
    """Compute / memory / communication seconds summed over a forward's kinds of kernel."""
    return {"compute": sum(kernels[k][0] for k in KERNEL_KINDS),
            "memory": sum(kernels[k][1] for k in KERNEL_KINDS),
            "communication": kernels["communication"]}
