"""Token-ID handoff from RelayDecode to MainDecode: which mode, and the batches RLD sends.

In: the plan's handoff settings (a typed `placer.plan.Plan`) and, per request, how many
output tokens RLD holds that MD lacks. Out: a `HandoffMode` and a `HandoffSession`, the
batches RLD sends as MainReady and MD's acks come (`HandoffBatch`: output indices
`first..last`, whether RLD stops after it).

The protocol is PDD's, defined once in `placer.pdd` (`CatchUpRule`, `HandoffProtocol`):
the executor runs it here and the simulator (`placer.sim.handoff`) times the same state
machine. The message sequence (`executor.roles.rld`, `executor.roles.md`):
- MD imports the prompt's KV and sends `MainReady`; on it RLD sends the first batch —
  every token MD lacks.
- **one-shot**: that batch is final: RLD stops decoding as it sends it; MD runs one
  extend-decode over the batch and streams on. Shortest time on RLD; the user's
  stream pauses for the batch's crossing and the big extend.
- **catch-up**: RLD keeps decoding and streaming; MD extends each batch and acks it,
  and each ack triggers the next batch — the tokens produced meanwhile (a round costs
  one way, MD's extend, one way back). A batch is final when at most
  `final_batch_tokens` are unsent or it is round `max_rounds`; RLD stops as it sends
  it, MD extends it and streams on. MD's passes stay small, the final batch's crossing
  and extend leave a small pause; RLD runs a few round trips longer.
- **adaptive** (the plan's default): `pdd.handoff_mode` — catch-up when the tokens
  pending for the handoff exceed `catch_up_threshold_tokens` (the plan's
  `handoff.catch_up_threshold_tokens`), else one-shot.

Indices are output-token indices: 0 is P's first token (MD already has it from P's KV
message), so the first batch starts at 1. No torch here; imports only `placer.pdd`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placer import pdd
from placer.pdd import HandoffBatch

if TYPE_CHECKING:
    from placer.plan import Plan

__all__ = ["HandoffBatch", "HandoffMode", "HandoffPolicy", "HandoffSession"]


class HandoffMode(str, enum.Enum):
    """The mode a request's handoff runs in (adaptive resolves to one of these)."""

    ONE_SHOT = pdd.ONE_SHOT
    CATCH_UP = pdd.CATCH_UP


@dataclass(frozen=True)
class HandoffPolicy:
    """How RLD hands a request to MD: the mode policy, its adaptive threshold, the catch-up rule."""

    mode: str = pdd.ADAPTIVE
    catch_up_threshold_tokens: int = pdd.DEFAULT_CATCH_UP_THRESHOLD_TOKENS
    catch_up: pdd.CatchUpRule = pdd.DEFAULT_CATCH_UP

    def __post_init__(self) -> None:
        if self.mode not in pdd.HANDOFF_MODES:
            raise ValueError(f"mode must be one of {pdd.HANDOFF_MODES}, got {self.mode!r}")
        threshold = self.catch_up_threshold_tokens
        if not isinstance(threshold, int) or threshold < 0:
            raise ValueError(f"catch_up_threshold_tokens must be a non-negative int, got {threshold!r}")
        if not isinstance(self.catch_up, pdd.CatchUpRule):
            raise ValueError(f"catch_up must be a placer.pdd.CatchUpRule, got {self.catch_up!r}")

    def choose(self, pending_tokens: int) -> HandoffMode:
        """The mode for a request with `pending_tokens` output tokens MD lacks."""
        return HandoffMode(pdd.handoff_mode(self.mode, pending_tokens, self.catch_up_threshold_tokens))

    @classmethod
    def from_plan(cls, plan: Plan, **overrides: Any) -> HandoffPolicy:
        """From a plan's `handoff` block: a typed `placer.plan.Plan` (JSON is parsed at the
        executor's edge, `Plan.model_validate`); `overrides` win."""
        if isinstance(plan, dict):
            raise TypeError("HandoffPolicy.from_plan takes a placer.plan.Plan: parse the JSON with Plan.model_validate")
        handoff = plan.handoff
        kw = {"mode": handoff.mode, "catch_up_threshold_tokens": int(handoff.catch_up_threshold_tokens)}
        return cls(**{**kw, **overrides})


class HandoffSession(pdd.HandoffProtocol):
    """RLD's side of one request's handoff: `placer.pdd.HandoffProtocol` in the mode the
    policy picks for `pending_tokens` (`mode` is a `HandoffMode`), under its catch-up rule."""

    def __init__(self, policy: HandoffPolicy, pending_tokens: int) -> None:
        super().__init__(policy.choose(pending_tokens), policy.catch_up)
        self.mode: HandoffMode
        self.policy = policy
