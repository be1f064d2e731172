"""The bench's figures: measured outcomes → the contract's keys; the plan's promise and the simulator's
figures in the same keys; the relative error of each.

in:  :class:`~placer.loadgen.client.Outcome` list, the SLA (TTFT P90 and TPOT seconds), the run's span;
     a plan's ``metrics``; a ``placer.sim`` result's data
out: dicts with :data:`KEYS` (``None`` where a source has no such figure) and :func:`relative_errors`

Definitions (as the simulator's, ``placer.sim.events.decode``): a request is *good* when it ended
without error, its TTFT is within ``sla.ttft_p90_s`` and its TPOT within ``sla.tpot_s``;
``sla_attainment`` = good / requests sent (errors count against it); ``goodput_rps`` = good / span and
``achieved_rps`` = requests that completed / span, the span running from the first arrival to the last
completion. TTFT and end-to-end count from each request's arrival time (``client.send``). Quantiles interpolate linearly between order statistics (numpy's default).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

#: the contract's figure keys, measured / predicted / simulated alike
KEYS = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "e2e_p90_s", "sla_attainment",
        "goodput_rps", "achieved_rps", "requests", "errors")


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (linear between order statistics); None when empty."""
    xs = sorted(values)
    if not xs:
        return None
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def good(o, ttft_sla_s: float, tpot_sla_s: float) -> bool:
    return (o.ok and o.ttft_s is not None and o.ttft_s <= ttft_sla_s
            and (o.tpot_s is None or o.tpot_s <= tpot_sla_s))


def measured(outcomes: Iterable, ttft_sla_s: float, tpot_sla_s: float, span_s: float) -> dict:
    """The measured figures of ``outcomes`` (plus ``e2e_p50_s``, ``e2e_p99_s``, ``error_kinds``, ``span_s``,
    ``output_tokens``, ``prefix_hit_rate`` the server reported)."""
    outs = list(outcomes)
    ok = [o for o in outs if o.ok]
    ttft = [o.ttft_s for o in ok if o.ttft_s is not None]
    tpot = [o.tpot_s for o in ok if o.tpot_s is not None]
    e2e = [o.e2e_s for o in ok if o.e2e_s is not None]
    n_good = sum(good(o, ttft_sla_s, tpot_sla_s) for o in outs)
    span = max(span_s, 1e-9)
    kinds = Counter(_kind(o.error) for o in outs if not o.ok)
    reported = [o for o in ok if o.cached_tokens is not None and o.prompt_tokens]
    return {
        "ttft_p50_s": _r(quantile(ttft, 0.5)), "ttft_p90_s": _r(quantile(ttft, 0.9)),
        "ttft_p99_s": _r(quantile(ttft, 0.99)),
        "tpot_p50_s": _r(quantile(tpot, 0.5)), "tpot_p90_s": _r(quantile(tpot, 0.9)),
        "e2e_p50_s": _r(quantile(e2e, 0.5)), "e2e_p90_s": _r(quantile(e2e, 0.9)), "e2e_p99_s": _r(quantile(e2e, 0.99)),
        "sla_attainment": _r(n_good / len(outs)) if outs else None,
        "goodput_rps": _r(n_good / span) if outs else None,
        "achieved_rps": _r(len(ok) / span) if outs else None,
        "requests": len(outs),
        "errors": len(outs) - len(ok),
        "error_kinds": dict(kinds.most_common(10)),
        "output_tokens": sum(o.output_tokens for o in ok),
        "prefix_hit_rate": _r(sum(o.cached_tokens for o in reported) / sum(o.prompt_tokens for o in reported))
        if reported else None,
        "span_s": _r(span_s, 3),
    }


def _kind(error: str | None) -> str:
    """An error message cut to its kind (``HTTP 503``, ``timeout``, …) for the summary's counts."""
    text = error or "unknown"
    head = text.split(":", 1)[0]
    return head if len(head) <= 40 else head[:40]


def predicted(metrics: Mapping) -> dict:
    """The plan's promise in the bench's keys: its metrics (its TPOT is its decode design, for both
    quantiles; it promises no end-to-end figure and counts no requests)."""
    tpot = metrics.get("tpot_s")
    return {"ttft_p50_s": metrics.get("ttft_p50_s"), "ttft_p90_s": metrics.get("ttft_p90_s"),
            "ttft_p99_s": metrics.get("ttft_p99_s"), "tpot_p50_s": tpot, "tpot_p90_s": tpot, "e2e_p90_s": None,
            "sla_attainment": metrics.get("sla_attainment"), "goodput_rps": metrics.get("goodput_rps"),
            "achieved_rps": metrics.get("served_rps"), "requests": None, "errors": None}


def simulated(data: Mapping) -> dict:
    """A simulation's figures (``placer.sim`` JSON) in the bench's keys (it times no end-to-end; a
    rejected request is its error)."""
    return {"ttft_p50_s": data.get("ttft_p50_s"), "ttft_p90_s": data.get("ttft_p90_s"),
            "ttft_p99_s": data.get("ttft_p99_s"), "tpot_p50_s": data.get("tpot_p50_s"),
            "tpot_p90_s": data.get("tpot_p90_s"), "e2e_p90_s": None,
            "sla_attainment": data.get("sla_attainment"), "goodput_rps": data.get("goodput_rps"),
            "achieved_rps": data.get("served_rps"), "requests": data.get("requests"),
            "errors": data.get("rejected_requests")}


def relative_errors(measured_figures: Mapping, reference: Mapping) -> dict:
    """(measured − reference) / reference per key where both are numbers and the reference is not 0."""
    out = {}
    for key in KEYS:
        m, ref = measured_figures.get(key), reference.get(key)
        if key in ("requests", "errors") or not isinstance(m, (int, float)) or not isinstance(ref, (int, float)):
            continue
        if ref != 0:
            out[key] = round((m - ref) / ref, 4)
    return out
