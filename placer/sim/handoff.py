"""Token-ID handoff from RelayDecode to MainDecode, timed from the moment MD holds the prompt's KV.

in:  the mode (one-shot or catch-up: the adaptive choice is :func:`placer.pdd.handoff_mode`),
     the tokens RLD has decoded beyond t0 (``pending``), the line's one-way delay and rate,
     RLD's step time, MD's extend-decode cost for k tokens; optionally the catch-up rule, the
     one-way delay back (MD → RLD) and how far RLD is into its current step
out: :class:`HandoffPlan` — when RLD stops and MD takes over, the extend work MD does, the
     pause the user sees, and the batches (the same ones the executor's RLD sends)

It replays the executor's protocol: the batches come from :class:`placer.pdd.HandoffProtocol`,
the one state machine `executor.handoff.HandoffSession` runs, stepped here with simulated time
along the executor's messages (`executor.roles.rld`, `executor.roles.md`). From MD holding
the KV:

* MD sends MainReady; it reaches RLD one way back later, and RLD sends the first batch: every
  token it has produced by then (≈15 B per token ID, :data:`placer.pdd.TOKEN_ID_BYTES`).
* **one-shot**: that batch is final. RLD stops decoding as it sends it; MD receives it one way
  (and its bytes) later, extend-decodes it in one pass and streams on.
* **catch-up**: RLD keeps decoding. MD extends each batch and acks it; the ack reaches RLD one
  way back later and triggers the next batch — what RLD produced meanwhile — so a round costs
  one way + MD's extend + one way back. The batch the rule (:class:`placer.pdd.CatchUpRule`)
  calls final (few tokens left, or the last round) stops RLD as it is sent; MD extends it and
  streams on.

In both modes the user's stream pauses from RLD's stop to MD's first token: the final batch's
crossing plus its extend — small after catch-up (a few tokens), bigger after one-shot (all of
them). RLD produces a token every ``rld_step_s``; ``rld_phase`` is the part of a step it had
done when MD got the KV (0: it has just produced ``pending``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from placer.pdd import DEFAULT_CATCH_UP, TOKEN_ID_BYTES, CatchUpRule, HandoffBatch, HandoffProtocol

_EPS = 1e-9  # a token due exactly at a message's arrival counts as produced


@dataclass(frozen=True)
class HandoffPlan:
    """One handoff's timing, in seconds from MD holding the KV."""

    mode: str
    takeover_s: float  # until the final batch reaches MD (MD then extends it and decodes the request)
    md_extend_s: float  # extend-decode work MD runs over all the batches (stalls its batch)
    gap_s: float  # pause in the user's token stream: RLD's stop → MD's first token
    rounds: int  # batches sent
    rld_stop_s: float = 0.0  # RLD stops decoding: it sends the final batch
    final_extend_s: float = 0.0  # MD's extend of the final batch (after takeover_s)
    batches: tuple[HandoffBatch, ...] = ()  # what RLD sent, in order
    #: (seconds from MD holding the KV, extend seconds) of each batch before the final one: MD
    #: extends it between its decode steps, so its whole batch stalls then
    md_stalls: tuple[tuple[float, float], ...] = ()


def _send_s(tokens: float, one_way_s: float, line_bytes_per_s: float) -> float:
    """Seconds until ``tokens`` token IDs sent now reach MD."""
    return one_way_s + tokens * TOKEN_ID_BYTES / line_bytes_per_s if line_bytes_per_s > 0 else one_way_s


def plan_handoff(mode: str, pending_tokens: int, one_way_s: float, line_bytes_per_s: float, rld_step_s: float,
                 extend_s: Callable[[int], float], rule: CatchUpRule = DEFAULT_CATCH_UP,
                 back_one_way_s: float | None = None, rld_phase: float = 0.0) -> HandoffPlan:
    """Timing of one handoff in ``mode`` ('one-shot' or 'catch-up') under ``rule``: MainReady,
    then :class:`HandoffProtocol`'s batches, each triggered by MD's ack of the one before.
    ``back_one_way_s`` (MD → RLD: MainReady and the acks) defaults to ``one_way_s``."""
    pending = max(0, pending_tokens)
    back = one_way_s if back_one_way_s is None else back_one_way_s

    def produced_upto(at: float) -> int:  # the highest output index RLD has produced ``at`` s after t
        return pending + int(rld_phase + at / rld_step_s + _EPS) if rld_step_s > 0 else pending

    def extend(batch: HandoffBatch) -> float:
        # MD's one extend-decode pass over the batch; an empty first batch still forwards t0
        # to predict the next token, an empty later one needs no pass (MD predicted it already).
        k = batch.num_tokens
        return extend_s(k) if k > 0 else (extend_s(1) if batch.round == 1 else 0.0)

    protocol = HandoffProtocol(mode, rule)
    sent_at = back  # MainReady reaches RLD: the first batch
    batch = protocol.start(produced_upto(sent_at))
    batches = [batch]
    stalls = []
    work = 0.0
    while True:
        arrives = sent_at + _send_s(batch.num_tokens, one_way_s, line_bytes_per_s)
        ext = extend(batch)
        work += ext
        if batch.final:
            break
        stalls.append((arrives, ext))
        sent_at = arrives + ext + back  # MD's ack reaches RLD: the next batch
        batch = protocol.on_ack(produced_upto(sent_at))
        batches.append(batch)
    return HandoffPlan(mode, arrives, work, arrives - sent_at + ext, protocol.rounds, sent_at, ext, tuple(batches),
                       tuple(stalls))
