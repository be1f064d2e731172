"""Queues across windows: the backlog a stretch leaves is carried into the next (a fluid account).

in:  per stretch (a part of a window with one set of pools up): the backlog carried in (requests), the
     offered rate λ, the fleet's capacity μ (requests/s it completes when saturated: a saturation run,
     ``placer.replan.loop.capacity_of``, made where the stretch's own run sees a queue grow or a backlog
     arrives), the length, the TTFT SLA
out: the backlog carried out, the share of the stretch's arrivals that wait past the SLA behind the
     queue (not good, whatever the from-empty run says of them) and the longest wait ahead of one

Each stretch is simulated from empty queues over a slice of its arrivals; that run is the truth for a
stretch whose queue holds steady, and its good fraction counts for the arrivals no queue delays. The
queue ahead of an arrival at ``t`` into the stretch is, as a fluid (FIFO, served at μ)::

    Q(t) = max(0, B + (λ − μ) t)        B: the backlog carried in

An arrival waits Q(t) / μ before its own service: past the TTFT SLA it is late. So the late arrivals
are those with Q(t) > μ · SLA — all of them while a backlog over μ · SLA drains, none once it is
below; in an overloaded stretch (λ > μ) the queue grows from B and the arrivals after it passes
μ · SLA are late (the from-empty run saw only its first slice of that growth). The backlog out is
Q(L). A stretch where nothing serves (a break-before-make dip to no pools) has μ = 0: every arrival
joins the backlog. A stretch whose queue holds steady and carries nothing in needs no capacity (μ
None: Q stays 0 — the stationary queue is the from-empty run's own).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Carry:
    backlog_out: float  # requests still queued at the stretch's end
    late_share: float  # of the stretch's arrivals, those the queue delays past the SLA
    wait_s: float  # the longest wait ahead of an arrival in the stretch (Q / μ)


def carry(backlog: float, rate_rps: float, capacity_rps: float | None, length_s: float, sla_ttft_s: float) -> Carry:
    """The fluid queue over one stretch (see the module docstring)."""
    if capacity_rps is None or (backlog <= 0 and capacity_rps >= rate_rps):
        return Carry(max(0.0, backlog) if capacity_rps is None else 0.0, 0.0, 0.0)
    mu = capacity_rps
    end = max(0.0, backlog + (rate_rps - mu) * length_s)
    if mu <= 0:
        return Carry(backlog + rate_rps * length_s, 1.0, float("inf"))
    limit = mu * sla_ttft_s  # a queue longer than this makes an arrival late
    slope = rate_rps - mu
    if slope == 0:
        late_s = length_s if backlog > limit else 0.0
    elif slope < 0:  # draining: late until Q falls to the limit
        late_s = min(length_s, max(0.0, (backlog - limit) / -slope))
    else:  # growing: late once Q passes the limit
        late_s = length_s - min(length_s, max(0.0, (limit - backlog) / slope))
    return Carry(end, late_s / length_s if length_s > 0 else 0.0, max(backlog, end) / mu)
