"""A trace problem's requests in time, classed as the router classes them: what each P instance's load drift is
read from (issue 42, :mod:`placer.load_drift`).

in:  a :class:`~placer.problem.Problem` with a trace (``Problem.trace``), at its arrival rate
out: :func:`classed_arrivals` — (arrival s at the problem's rate, class name, input tokens, P's prefix hit) per
     trace request, classed by :func:`placer.workload.decode_hits.classed_records` (the simulator's router's
     rule), its times scaled as the simulator replays the trace at the scenario's rate (the trace's own rate,
     :func:`placer.workload.fit.trace_arrival_rps`, over the problem's); kept per (trace, classes, rate)
"""

from __future__ import annotations

import functools

from placer.errors import InputError
from placer.workload.decode_hits import classed_records
from placer.workload.fit import trace_arrival_rps
from placer.workload.trace import read_trace


def classed_arrivals(problem, served: frozenset[str]) -> tuple[tuple[float, str, int, float], ...]:
    """The problem's trace requests as (arrival s, class name, input tokens, P-side hit), each classed among the
    ``served`` classes (those the plan routes: the router's choice); () without a trace."""
    trace, rate = getattr(problem, "trace", None), getattr(problem, "arrival_rps", 0.0)
    if trace is None or rate <= 0 or not served:
        return ()
    centres = tuple((c.name, c.hit_rate, c.input_tokens, c.output_tokens) for c in problem.classes if c.name in served)
    try:
        return _classed(str(trace), centres, rate)
    except InputError:  # a trace without a rate (one timestamp): no time to read a drift over
        return ()


@functools.lru_cache(maxsize=8)
def _classed(path: str, centres: tuple, rate_rps: float) -> tuple[tuple[float, str, int, float], ...]:
    scale = rate_rps / trace_arrival_rps(path)
    classes = [_Centre(*c) for c in centres]
    out = []
    first = None
    for rec, k, p_hit in classed_records(read_trace(path), classes):
        first = rec.timestamp_s if first is None else first
        out.append(((rec.timestamp_s - first) / scale, classes[k].name, rec.input_tokens, p_hit / rec.input_tokens))
    return tuple(out)


class _Centre:
    """A class as the classing reads it: its name, hit and lengths."""

    __slots__ = ("name", "hit_rate", "input_tokens", "output_tokens")

    def __init__(self, name: str, hit_rate: float, input_tokens: float, output_tokens: float):
        self.name, self.hit_rate, self.input_tokens, self.output_tokens = name, hit_rate, input_tokens, output_tokens
