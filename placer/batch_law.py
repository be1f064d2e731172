"""A decoder's batch law: how many requests it decodes at once, its engine cap and its KV included (issue 42).

in:  a step table (seconds of a step of n sequences), a pool's tokens/s to decode; for the KV, its load rows
     ((arrivals/s λ_k, held L_k, footprint f_k): :meth:`placer.decode_state.DecodeState.kv_load`)
out: :func:`batch_law` (the stationary law of the number decoding, with the line that waits for KV folded onto the
     count where the KV binds), :func:`kv_batch_cap` (that count: the requests the KV holds when an arrival of
     the mean footprint no longer fits)

A decoder admits by free KV (:mod:`placer.kv_admission`): it never holds more than its KV, and an arrival that
does not fit waits in the line instead of decoding. So the batch is not the free law's number N but min(N, C),
C the count at which the KV binds, and above C the line runs at the full decoder's rate: N's law is the free
one below C and geometric of ratio λ_tok·step(C)/C beyond (the waiting requests do not slow the steps). The
steps the tokens see are then those of batches no larger than C: fewer than the free law's upper tail, so by
Little a token takes less, the stays are shorter and the KV held (λ × output × that step) is less — what
:func:`placer.kv_wait.kv_wait_law` then prices the line from. rnd-7-21's re-solved decoders alone in the
simulator (``placer.sim.decode.DecodeInstance`` fed their planned classes, 200,000 s, two seeds; a one-decoder
harness as tests/placer/test_batch_law_kv_cap.py drives one):
MD dc1 MI300X tp4 lived a batch of 105.2 / 104.6 where the free law says 107.8 and this 104.4; dc3 Gaudi3 tp4
68.4 (30,000 s, two seeds) where 71.0 and 68.1; dc3 Gaudi3 tp2 28.5 where 30.7 and 29.4.

C is taken at the mix the pool holds, a hard count: C = (K − f̄)/m̄ + 1 (m̄ = M/B the held requests' mean
footprint, f̄ the arrivals'; the room the KV-wait law's β measures, :func:`placer.kv_wait.kv_room_beta`),
interpolated between the whole counts about it. The footprints' spread about m̄ is left out: where the step
grows with the batch the count's variance (the Poisson one over φ) dominates the KV's
(:func:`placer.kv_admission.kv_occupancy_variance`; rnd-7-21's dc1: 2 % of it is the footprints').
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["batch_law", "kv_batch_cap"]

#: the law's unnormalised terms are scaled down by 2**_RESCALE_BITS once one passes this: their product up to
#: the mode is e^794 on rnd-31-5's MD dc0 (22,546 tokens/s at a 10,463-token mean context), past a float's e^709,
#: which read as "cannot keep up" where the full batch makes 30 % more tokens than arrive
_RESCALE_BITS = 600
_RESCALE_ABOVE = 2.0 ** 900


def kv_batch_cap(capacity_tokens: float, load: Iterable[tuple[float, float, float]], held: float = 0.0) -> float | None:
    """C − ``held``: the number decoding at which a decoder of ``capacity_tokens`` admits no arrival of the mean
    footprint (module docstring), its relay holds ``held`` (in the load's rows, beside the others) left out; None
    where nothing is held or arrives, or the KV holds less than one request beside the holds (the wait law's
    floor prices that)."""
    rows = [(a, h, f) for a, h, f in load if a > 0 or h > 0]
    arrivals = sum(a for a, _, _ in rows)
    count = sum(h for _, h, _ in rows)
    mean = sum(h * f for _, h, f in rows)
    if arrivals <= 0 or count <= 0 or mean <= 0 or capacity_tokens <= 0:
        return None
    arrival = sum(a * f for a, _, f in rows) / arrivals
    cap = (capacity_tokens - arrival) / (mean / count) + 1.0 - held
    return cap if cap >= 1.0 else None


def batch_law(tokens_per_s: float, step_at, cap: int, held: float = 0.0,
              kv_cap: float | None = None) -> tuple[list[float], bool]:
    """The stationary law of the number of requests in a decoder's batch: ``probs[n]``, n = 0 … (at most
    ``cap``), and whether the decoder cannot keep up even at its cap. Every request in the batch gets one token
    per step and the step of n requests takes ``step_at(n)``: a processor-sharing queue whose rate depends on
    its number (a symmetric queue, insensitive to the output lengths' law), so with λ_tok tokens/s to decode,
    P(n) / P(n − 1) = λ_tok · step(n) / n. A step linear in n (c·n) gives the geometric law of M/G/1-PS
    (mean ρ / (1 − ρ), ρ = λ_tok·c), a step that does not grow with n the Poisson law of M/G/∞ (mean λ_tok·a);
    any measured table its own law. ``held``: requests held whatever the step (RLD's relay holds), in the
    batch on average beside these. Overloaded where λ_tok · step(cap) / cap ≥ 1 (the full batch makes fewer
    tokens than arrive), or the holds fill the cap. ``kv_cap``: the number decoding at which the KV binds
    (:func:`kv_batch_cap`): the law past it is the line's, folded onto it (module docstring); where the full KV
    cannot keep up (λ_tok · step(C) / C ≥ 1) the free law (the KV-wait law's floor prices that line)."""
    cap = max(int(cap), 1)
    if held >= cap:  # the relays it holds fill every slot (a line too slow for them): nothing else decodes
        return [1.0], True
    overloaded = tokens_per_s * step_at(cap + held) / cap >= 1.0
    probs, term, total = [1.0], 1.0, 1.0
    for n in range(1, cap + 1):
        ratio = tokens_per_s * step_at(n + held) / n
        term *= ratio
        if not math.isfinite(term) or (overloaded and term > _RESCALE_ABOVE):  # its mass runs towards the cap
            return [1.0], True
        if term > _RESCALE_ABOVE:  # a busy decoder's terms outgrow a float before they turn down: scale them
            probs = [math.ldexp(x, -_RESCALE_BITS) for x in probs]  # (exact: a power of two)
            term, total = math.ldexp(term, -_RESCALE_BITS), math.ldexp(total, -_RESCALE_BITS)
        probs.append(term)
        total += term
        if ratio < 0.9 and term < 1e-12 * total:
            break
    law = [x / total for x in probs]
    if overloaded or kv_cap is None or kv_cap >= len(law) - 1 or tokens_per_s <= 0:
        return law, overloaded
    low = max(int(kv_cap), 1)
    high = min(low + 1, cap)
    folded = [_folded(law, c, tokens_per_s * step_at(c + held) / c) for c in (low, high)]
    if folded[0] is None or folded[1] is None:
        return law, overloaded
    w = min(max(kv_cap - low, 0.0), 1.0) if high > low else 0.0
    lo, hi = folded
    if w <= 0.0:
        return lo, overloaded
    return [(1.0 - w) * (lo[n] if n < len(lo) else 0.0) + w * (hi[n] if n < len(hi) else 0.0)
            for n in range(max(len(lo), len(hi)))], overloaded


def _folded(law: list[float], c: int, ratio: float) -> list[float] | None:
    """The free ``law`` below ``c`` and, at c, its mass there with the line behind it (geometric of ``ratio``:
    P(c)/(1 − ratio)), normalised; None where the line never settles (ratio ≥ 1)."""
    if ratio >= 1.0 or c >= len(law):
        return None
    head = law[:c] + [law[c] / (1.0 - ratio)]
    total = sum(head)
    return [x / total for x in head]
