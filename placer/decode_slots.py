"""A decode instance's step row: the TPOT as the classes a pool serves live it.

in:  an :class:`~placer.perfmodel.InstanceModel`, the TPOT SLA, the scenario's mix context
     (:func:`placer.flows.decode_context_tokens`)
out: :func:`context_slot_weight` (what one held request counts for on the
     step, in requests of the mix), :func:`tpot_batch` (the batch whose step at a context meets the TPOT,
     whatever the engine's batch cap and the KV), :class:`StepRow` (one instance's step row: its fixed
     part, per-sequence cost and the step it is held to; the share of an instance a class's req/s takes)

A decode step is a + B·(e + g·x̄) for B sequences of mean context x̄ (a batch of several contexts steps
as at their mean: the simulator's and the evaluation's rule, :mod:`placer.sim.decode`,
:mod:`placer.decode_state`), so a request of context x_k adds c_k = e + g·x_k, and a pool holding L_k
requests of class k steps at s = a + Σ_k L_k·c_k. A request stays its tokens × s (Little), so
s = a/(1 − Σ_k λ_k·O_k·c_k): the step row s ≤ s_max is linear in the rates. (C6) keeps it beside the
count row (at most u·B_q requests, the design batch, which the engine's batch cap and the KV may set below
the TPOT's); at the mix the count row implies it, a pool given the long-context classes holds fewer
requests. `validate` checks both; the evaluation settles each pool's batch at its own classes' context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from placer.perfmodel import InstanceModel

if TYPE_CHECKING:
    from placer.problem import Class

#: A weight is never below this (a request always costs its share of the step's per-sequence work).
MIN_WEIGHT = 0.05
_BATCH_LIMIT = 1 << 20  # a step that never reaches the TPOT: the search stops here


def context_slot_weight(im: InstanceModel, batch: float, context_tokens: float, own_context_tokens: float) -> float:
    """What one held request of mean context ``own_context_tokens`` counts for on the step of ``im`` at
    ``batch`` B of the mix's ``context_tokens`` x̄, in requests of that mix: the step grows by what each
    sequence adds, its own context's attention included (step(B, x) = a + B·(e + g·x)), so it costs
    (e + g·x_k)/(e + g·x̄) = 1 + [step(B, x_k) − step(B, x̄)]/B ÷ [step(B, x̄) − step(1, x̄)]/(B − 1)."""
    if batch <= 1:
        return 1.0
    per_seq = (im.step_s(batch, context_tokens) - im.step_s(1.0, context_tokens)) / (batch - 1.0)
    if per_seq <= 0:
        return 1.0
    extra = (im.step_s(batch, own_context_tokens) - im.step_s(batch, context_tokens)) / batch
    return max(1.0 + extra / per_seq, MIN_WEIGHT)


def tpot_batch(im: InstanceModel, context_tokens: float, tpot_s: float) -> int:
    """The largest batch whose step at ``context_tokens`` meets ``tpot_s`` (per accepted token), the
    engine's batch cap and the KV left out (the count row and (C7) hold those); 0 when one request misses."""
    def meets(b: int) -> bool:
        return im.step_s(b, context_tokens) / im.mtp_accept <= tpot_s

    if not meets(1):
        return 0
    lo, hi = 1, 2
    while meets(hi):
        if hi >= _BATCH_LIMIT:
            return hi
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # meets(lo), not meets(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo


@dataclass(frozen=True)
class StepRow:
    """The step row of one decode instance ``im`` at the mix's ``context_tokens``: its step a + Σ_k L_k·c_k
    (``fixed_s`` a; c_k = ``per_seq_s`` × w_k, w_k by :func:`context_slot_weight` at ``batch`` B_t, the mix's
    TPOT batch) held at most ``limit_s``. A request stays its tokens × the step, so the step is its own
    fixed point, s = a / (1 − Σ_k λ_k·O_k·c_k) (+ the relay holds', which do not stretch with it), and
    s ≤ limit_s is linear in the rates: Σ_k λ_k·held_k·c_k / (limit_s − a) ≤ 1 per instance, held_k the
    seconds a request is held at that step (:meth:`share`)."""

    im: InstanceModel
    batch: int
    context_tokens: float
    fixed_s: float
    per_seq_s: float
    limit_s: float

    @classmethod
    def at_mix(cls, im: InstanceModel, context_tokens: float, tpot_s: float, utilization: float,
               design_step_s: float) -> StepRow:
        """The row of ``im`` at the mix's context: its step held within the TPOT with the count row's margin,
        a + ``utilization``·(TPOT − a) (the step of u·B_t mix requests), and within the design's step
        ``design_step_s`` (the time held the count row and the KV row (C7) charge a request: with the step
        no longer than that, neither undercounts the requests a pool of long-context classes holds)."""
        batch = max(tpot_batch(im, context_tokens, tpot_s), 1)
        ref = max(batch, 2)
        per_seq = max((im.step_s(ref, context_tokens) - im.step_s(1.0, context_tokens)) / (ref - 1.0), 0.0)
        fixed = im.step_s(ref, context_tokens) - ref * per_seq
        limit = min(fixed + utilization * (tpot_s * im.mtp_accept - fixed), design_step_s)
        return cls(im, batch, context_tokens, fixed, per_seq, limit)

    def weight(self, c: Class, tokens: float | None = None) -> float:
        """One held request of ``c`` on this row, in mix requests; ``tokens``: the tokens it decodes here
        (RLD's eager tokens of a relayed request, held at context I_k + tokens/2), default its output."""
        own = c.input_tokens + (c.output_tokens if tokens is None else tokens) / 2
        return context_slot_weight(self.im, self.batch, self.context_tokens, own)

    def share(self, c: Class, held_s: float, tokens: float | None = None) -> float:
        """The share of one instance that one req/s of ``c`` held ``held_s`` seconds takes on the row:
        held_s·c_k / (limit_s − a) (``tokens``: as :meth:`weight`); a request decoding here is held its
        tokens × ``limit_s``, a relayed one its line's hold."""
        return held_s * self.per_seq_s * self.weight(c, tokens) / max(self.limit_s - self.fixed_s, 1e-12)
