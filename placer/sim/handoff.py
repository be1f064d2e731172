"""Token-ID handoff from RelayDecode to MainDecode, once MD holds the prompt's KV.

in:  tokens RLD has emitted that MD lacks (``pending``), the one-way delay of the line,
     RLD's step time, MD's extend-decode cost for k tokens, the policy
out: :class:`HandoffPlan` — the mode, how long until MD takes over, the extend work MD
     does, and the gap the user sees.

* **one-shot**: RLD stops at once and sends all ``pending`` token IDs (≈15 B each);
  MD rebuilds their KV in one extend-decode pass and continues. The user sees a gap of
  one-way delay + extend time; RLD is freed soonest.
* **catch-up**: RLD keeps decoding while IDs go over in rounds; each round MD extends
  what arrived while RLD emitted more; when fewer than one new token accrued during a
  round, MD has caught up and takes over. No gap; RLD works a little longer.
* **adaptive**: catch-up when more than ``threshold`` tokens are pending (a big
  one-shot extend would stall MD's batch), one-shot otherwise — the rule is
  :func:`placer.flows.handoff_mode`, shared with the executor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from placer.pdd import CATCH_UP, ONE_SHOT, TOKEN_ID_BYTES


@dataclass(frozen=True)
class HandoffPlan:
    mode: str
    takeover_s: float  # from MD holding the KV until MD decodes the request
    md_extend_s: float  # extend-decode work MD runs (stalls its batch)
    gap_s: float  # pause in the user's token stream
    rounds: int


def _send_s(tokens: float, one_way_s: float, line_bytes_per_s: float) -> float:
    """Seconds until ``tokens`` token IDs sent now reach MD."""
    return one_way_s + tokens * TOKEN_ID_BYTES / line_bytes_per_s if line_bytes_per_s > 0 else one_way_s


def plan_handoff(mode: str, pending_tokens: int, one_way_s: float, line_bytes_per_s: float, rld_step_s: float,
                 extend_s: Callable[[int], float], max_rounds: int = 8) -> HandoffPlan:
    """Timing of one handoff in ``mode`` ('one-shot' or 'catch-up')."""
    k = max(0, pending_tokens)
    if mode == ONE_SHOT:
        ext = extend_s(k) if k > 0 else 0.0
        took = _send_s(k, one_way_s, line_bytes_per_s)
        return HandoffPlan(ONE_SHOT, took, ext, took + ext, 1)
    total = ext_total = 0.0
    rounds = 0
    kf = float(k)
    while rounds < max_rounds:
        rounds += 1
        ext = extend_s(max(1, round(kf)))
        dt = _send_s(kf, one_way_s, line_bytes_per_s) + ext
        total += dt
        ext_total += ext
        kf = dt / rld_step_s if rld_step_s > 0 else 0.0  # RLD emitted this many meanwhile
        if kf < 1.0:
            break
    return HandoffPlan(CATCH_UP, total, ext_total, 0.0, rounds)
