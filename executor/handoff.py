"""Token-ID handoff from RelayDecode to MainDecode: which mode, and the batches it sends.

In: the plan's handoff settings and, per request, how many output tokens RLD holds
that MD lacks. Out: a `HandoffMode` and, step by step, the `HandoffBatch`es RLD
sends (output indices `first..last`, whether RLD stops after it).

Modes (the mode names, the adaptive rule and its default threshold are PDD's, from
`placer.flows`):
- **one-shot**: RLD stops at once and sends every token MD lacks in one batch; MD
  runs one extend-decode over them. Shortest time on RLD, one bigger pass on MD.
- **catch-up**: RLD sends what it has and keeps decoding; each acknowledgement from
  MD triggers the next batch of tokens produced meanwhile, until at most
  `final_batch_tokens` are left (or `max_rounds` batches went out): that last batch
  is final and RLD stops. MD's passes stay small; RLD runs a few round trips longer.
- **adaptive** (the plan's default): `pdd.handoff_mode` — catch-up when the tokens
  pending for the handoff exceed `catch_up_threshold_tokens` (the plan's
  `handoff.catch_up_threshold_tokens`), else one-shot.

Indices are output-token indices: 0 is P's first token (MD already has it from
P's KV message), so the first batch starts at 1. No torch here; imports only the
placer base layer (`placer.flows`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from placer import pdd
class HandoffMode(str, enum.Enum):
    """The mode a request's handoff runs in (adaptive resolves to one of these)."""

    ONE_SHOT = pdd.ONE_SHOT
    CATCH_UP = pdd.CATCH_UP


@dataclass(frozen=True)
class HandoffPolicy:
    """How RLD hands a request to MD."""

    mode: str = pdd.ADAPTIVE
    catch_up_threshold_tokens: int = pdd.DEFAULT_CATCH_UP_THRESHOLD_TOKENS
    final_batch_tokens: int = 8
    max_rounds: int = 4

    def __post_init__(self) -> None:
        if self.mode not in pdd.HANDOFF_MODES:
            raise ValueError(f"mode must be one of {pdd.HANDOFF_MODES}, got {self.mode!r}")
        for name in ("catch_up_threshold_tokens", "final_batch_tokens", "max_rounds"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (1 if name == "max_rounds" else 0):
                raise ValueError(f"{name} must be a non-negative int (max_rounds >= 1), got {value!r}")

    def choose(self, pending_tokens: int) -> HandoffMode:
        """The mode for a request with `pending_tokens` output tokens MD lacks."""
        return HandoffMode(pdd.handoff_mode(self.mode, pending_tokens, self.catch_up_threshold_tokens))

    @classmethod
    def from_plan(cls, plan: Any, **overrides: Any) -> HandoffPolicy:
        """From a plan's `handoff` block (`placer.plan.Plan` or its JSON dict)."""
        handoff = plan["handoff"] if isinstance(plan, dict) else plan.handoff
        get = handoff.get if isinstance(handoff, dict) else (lambda k, d=None: getattr(handoff, k, d))
        threshold = get("catch_up_threshold_tokens", pdd.DEFAULT_CATCH_UP_THRESHOLD_TOKENS)
        kw = {"mode": get("mode", pdd.ADAPTIVE), "catch_up_threshold_tokens": int(threshold)}
        return cls(**{**kw, **overrides})


@dataclass(frozen=True)
class HandoffBatch:
    """Output tokens `first_index..last_index` (empty when last < first); `final`: RLD stops after it."""

    first_index: int
    last_index: int
    final: bool
    round: int

    @property
    def num_tokens(self) -> int:
        return max(0, self.last_index - self.first_index + 1)


class HandoffSession:
    """RLD's side of one request's handoff: the batches to send as tokens and acks come."""

    def __init__(self, policy: HandoffPolicy, pending_tokens: int) -> None:
        self.policy = policy
        self.mode = policy.choose(pending_tokens)
        self.sent_upto = 0  # MD has output token 0 from P
        self.rounds = 0
        self.final_sent = False

    def start(self, produced_upto: int) -> HandoffBatch:
        """The first batch, given the highest output index RLD has produced (-1: none yet)."""
        return self._batch(produced_upto, final=self.mode is HandoffMode.ONE_SHOT or produced_upto < 0)

    def on_ack(self, produced_upto: int) -> HandoffBatch:
        """MD acknowledged the last batch: the next one (final once few tokens are left)."""
        if self.final_sent:
            raise ValueError("the handoff already sent its final batch")
        unsent = produced_upto - self.sent_upto
        final = unsent <= self.policy.final_batch_tokens or self.rounds + 1 >= self.policy.max_rounds
        return self._batch(produced_upto, final)

    def _batch(self, produced_upto: int, final: bool) -> HandoffBatch:
        self.rounds += 1
        batch = HandoffBatch(self.sent_upto + 1, max(produced_upto, self.sent_upto), final, self.rounds)
        self.sent_upto = batch.last_index
        self.final_sent = final
        return batch
