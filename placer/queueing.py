"""Queueing laws the planner, the evaluation and the checks share: a WAN transfer on a shared
line, and the M/G/1 waiting time of a P queue.

in:  bytes, a line's rate, RTT and utilisation; a queue's utilisation and service moments
out: :func:`wan_transfer_s` (mean seconds of one transfer under processor sharing) and
     :class:`WaitModel` (mean wait, P(W > t), quantiles). The tails built on these live in
     :mod:`placer.ttft_tail`, the P-queue layouts in :mod:`placer.flows`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def wan_transfer_s(n_bytes: float, link_bytes_per_s: float, rtt_s: float, utilization: float) -> float:
    """Seconds for one KV transfer over a shared WAN line.

    Transfers share the line like processor sharing (concurrent TCP flows): at
    utilisation ρ a transfer of b bytes takes b / (C (1 − ρ)) on average, plus one
    round trip for the request/ack of the transfer protocol.
    """
    if n_bytes <= 0:
        return 0.0
    if link_bytes_per_s <= 0:
        return math.inf
    return n_bytes / (link_bytes_per_s * max(1e-3, 1.0 - utilization)) + rtt_s


@dataclass(frozen=True)
class WaitModel:
    """M/G/1 waiting time at utilisation ``rho`` with service moments ``mean_s``, ``second_moment_s2``."""

    rho: float
    mean_s: float
    second_moment_s2: float
    ride: float = 0.0
    """Probability that a request rides along in a forward already queued (packed prefills,
    :func:`placer.flows.packed_wait_law`); 0 where prompts are not packed."""
    mate_cost_s: float = 0.0
    """Mean seconds one more short prompt adds to a packed forward (its prefill alone less the
    weight read it shares); 0 where prompts are not packed."""

    @property
    def mean_wait_s(self) -> float:
        if self.rho <= 0:
            return 0.0
        if self.rho >= 1:
            return math.inf
        lam = self.rho / self.mean_s
        return lam * self.second_moment_s2 / (2 * (1 - self.rho))

    def prob_exceeds(self, t: float) -> float:
        """P(W > t) ≈ ρ exp(−tρ/E[W]) for t ≥ 0; 1 for t < 0."""
        if t < 0:
            return 1.0
        if self.rho <= 0:
            return 0.0
        if self.rho >= 1:
            return 1.0
        return self.rho * math.exp(-t * self.rho / self.mean_wait_s)

    def quantile_s(self, q: float) -> float:
        if self.rho <= 0 or 1 - q >= self.rho:
            return 0.0
        if self.rho >= 1:
            return math.inf
        return self.mean_wait_s / self.rho * math.log(self.rho / (1 - q))
