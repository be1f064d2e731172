"""PDD's vocabulary and flow rules, defined once.

in:  nothing of the project's (this module is the floor: the MILP, `evaluate`, `validate`,
     the simulator, the executor's routing and handoff and the request log import it)
out: the role and pipeline names, the SLA quantile, the anomalous-traffic filter rule
     with its defaults, and the token-ID handoff rule with its default.

Roles: P (prefill), RLD (RelayDecode, next to P over RDMA), MD (MainDecode, across the
WAN), D (plain decode of the PD baselines). Pipelines: P-MD (high hit: go straight),
P-RLD-MD (low hit: RLD decodes while the KV crawls to MD, then hands over token IDs),
P-RLD (filtered traffic only: long input, low hit, short output finishes on RLD),
P-D (the PD baselines).
"""

from __future__ import annotations

from dataclasses import dataclass

P, RLD, MD, D = "P", "RLD", "MD", "D"
ROLES = (P, RLD, MD, D)
DECODE_ROLES = (RLD, MD, D)

P_MD, P_RLD_MD, P_RLD, P_D = "P-MD", "P-RLD-MD", "P-RLD", "P-D"
PIPELINES = (P_MD, P_RLD_MD, P_RLD, P_D)
RELAY_PIPELINES = (P_RLD_MD, P_RLD)  # the ones that decode on RLD first

#: The SLA's TTFT quantile: a plan meets it when at most 10 % of requests are late (P90).
SLA_QUANTILE = 0.90


@dataclass(frozen=True)
class FilterRule:
    """The anomalous-traffic filter: a request with a long input, a low prefix hit and a
    short output (all three) finishes on RLD (pipeline P-RLD) and never crosses the WAN."""

    min_input_tokens: int = 8192  # input at least this long
    max_hit_rate: float = 0.5  # prefix hit rate below this
    max_output_tokens: int = 500  # output shorter than this

    def is_filtered(self, input_tokens: int, hit_rate: float, output_tokens: int) -> bool:
        return (input_tokens >= self.min_input_tokens and hit_rate < self.max_hit_rate
                and output_tokens < self.max_output_tokens)


DEFAULT_FILTER = FilterRule()

ADAPTIVE, ONE_SHOT, CATCH_UP = "adaptive", "one-shot", "catch-up"
HANDOFF_MODES = (ADAPTIVE, ONE_SHOT, CATCH_UP)
#: Adaptive handoff: catch-up when more output tokens than this are pending, else one-shot.
DEFAULT_CATCH_UP_THRESHOLD_TOKENS = 64
#: Bytes of one token ID on the wire, framing included (the report: 100 IDs ≈ 1.5 KB).
TOKEN_ID_BYTES = 15


def handoff_mode(policy: str, pending_tokens: int,
                 threshold_tokens: int = DEFAULT_CATCH_UP_THRESHOLD_TOKENS) -> str:
    """The handoff mode for a request with ``pending_tokens`` output tokens MD lacks:
    ``policy`` itself when it is one-shot or catch-up; adaptive picks catch-up above the
    threshold (a big one-shot extend would stall MD's batch), one-shot otherwise."""
    if policy not in HANDOFF_MODES:
        raise ValueError(f"handoff mode must be one of {', '.join(HANDOFF_MODES)}, got {policy!r}")
    if policy == ADAPTIVE:
        return CATCH_UP if pending_tokens > threshold_tokens else ONE_SHOT
    return policy
