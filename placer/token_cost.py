"""The prices operators quote: USD per million input, cached-input and output tokens of a plan.

in:  a Problem, a Plan (pools, routes, prefill-side assignments), each pool's instance model
     and, for aggregated pools, the share of their time spent on prefill
out: :class:`TokenPrices` — ``usd_per_million_input_tokens`` (uncached prompt tokens),
     ``usd_per_million_cached_input_tokens`` (prompt tokens found in the prefix cache) and
     ``usd_per_million_output_tokens``; None where the plan serves no such token.

Rules (cost is the plan's whole hourly cost, idle capacity included, over the tokens it
serves — served, not only goodput, as a provider bills every token):

* A pool's cost goes to the phase whose work it does: P pools to input, decode pools (RLD,
  MD, D) to output, an aggregated pool (A) split by the share of its step time its prefill
  chunks take (:func:`placer.aggregated.agg_prefill_time_share`).
* Input cost is split between cached and uncached prompt tokens by the prefill seconds each
  causes, from the performance model: a prompt of I tokens at hit h takes prefill_s(I, h);
  its n = (1 − h)·I new tokens alone, as a fresh prompt, take prefill_s(n, 0); the
  difference is what the cached prefix costs (the new tokens' attention over it and its KV
  reads). So a cached token is cheap but not free, and a prefix-heavy workload sees it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from placer.pdd import AGG, PREFILL_ROLES
from placer.perfmodel import InstanceModel
from placer.plan import Plan
from placer.problem import Problem

PER_MILLION = 1e6
S_PER_H = 3600.0


@dataclass(frozen=True)
class TokenPrices:
    usd_per_million_input_tokens: float | None
    usd_per_million_cached_input_tokens: float | None
    usd_per_million_output_tokens: float | None


def _per_million(cost_usd_per_h: float, tokens_per_s: float) -> float | None:
    return cost_usd_per_h / (tokens_per_s * S_PER_H) * PER_MILLION if tokens_per_s > 0 else None


def _phase_costs(plan: Plan, models: dict[tuple, InstanceModel],
                 agg_prefill_share: dict[tuple, float]) -> tuple[float, float]:
    """(USD/h of prefill work, USD/h of decode work) over the plan's pools."""
    cost_in = cost_out = 0.0
    for p in plan.pools:
        key = p.key
        if p.count <= 0 or key not in models:
            continue
        price = models[key].price_usd_per_h * p.count
        share = agg_prefill_share.get(key, 0.0) if p.role == AGG else 1.0 if p.role in PREFILL_ROLES else 0.0
        cost_in += price * share
        cost_out += price * (1.0 - share)
    return cost_in, cost_out


def token_prices(problem: Problem, plan: Plan, models: dict[tuple, InstanceModel],
                 agg_prefill_share: dict[tuple, float] | None = None) -> TokenPrices:
    """USD per million tokens of each kind (see the module doc for the rules)."""
    classes = {c.name: c for c in problem.classes}
    cost_in, cost_out = _phase_costs(plan, models, agg_prefill_share or {})
    tokens = defaultdict(float)  # per second: new, cached, output
    seconds = defaultdict(float)  # prefill busy seconds per second: new, cached
    for a in plan.assignments:
        key = a.key
        if a.role not in PREFILL_ROLES or a.rps <= 0 or key not in models:
            continue
        c, im = classes[a.request_class], models[key]
        new = max(1.0, (1.0 - c.hit_rate) * c.input_tokens)
        full_s, alone_s = im.prefill_s(c.input_tokens, c.hit_rate), im.prefill_s(new, 0.0)
        tokens["new"] += a.rps * new
        tokens["cached"] += a.rps * (c.input_tokens - new)
        seconds["new"] += a.rps * min(full_s, alone_s)
        seconds["cached"] += a.rps * max(0.0, full_s - alone_s)
    for r in plan.routes:
        tokens["output"] += r.rps * classes[r.request_class].output_tokens
    busy = seconds["new"] + seconds["cached"]
    cached_share = seconds["cached"] / busy if busy > 0 else 0.0
    return TokenPrices(
        usd_per_million_input_tokens=_per_million(cost_in * (1 - cached_share), tokens["new"]),
        usd_per_million_cached_input_tokens=_per_million(cost_in * cached_share, tokens["cached"]),
        usd_per_million_output_tokens=_per_million(cost_out, tokens["output"]),
    )
