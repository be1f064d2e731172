"""Bucket observed requests into the planner's request classes.

in:  records (objects or dicts) with ``input_tokens``, ``output_tokens``, ``hit_rate`` —
     trace records, or the service's request log (the replanning jobs call
     :func:`fit_classes` on it); or a trace path (:func:`classes_from_trace`)
out: ``list[RequestClass]`` whose shares sum to 1, ready for a scenario's
     ``workload.classes``.

Rules:

* **anomalous**: what :class:`placer.flows.FilterRule` filters — long input
  (≥ ``filter_min_input_tokens``), low hit (< ``filter_max_hit_rate``), short output
  (< ``filter_max_output_tokens``), the traffic the PDD filter may finish on
  RelayDecode — gets its own class.
* the rest go into hit-rate buckets (finer near 1, where agentic traffic lives); a
  bucket under ``min_share`` of the requests merges into its neighbour.
* a class's input and output are the bucket's mean lengths; its hit rate is the
  *token-weighted* hit, 1 − Σ new tokens / Σ input tokens, so the class keeps the
  bucket's prefill work and the KV bytes that cross the WAN.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from placer.errors import InputError
from placer.pdd import DEFAULT_FILTER, FilterRule
from placer.specs import RequestClass

#: Hit-rate bucket edges: coarse at low hit, fine above 0.9 (the PDD histogram's buckets).
HIT_EDGES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 1.0)


def _field(record: object, name: str) -> float:
    if isinstance(record, dict):
        value = record.get(name)
    else:
        value = getattr(record, name, None)
    if value is None:
        raise InputError(f"request record has no {name!r}: {record!r}"[:200])
    return value


class _Bucket:
    __slots__ = ("lo", "hi", "n", "sum_in", "sum_out", "sum_new")

    def __init__(self, lo: float, hi: float):
        self.lo, self.hi = lo, hi
        self.n, self.sum_in, self.sum_out, self.sum_new = 0, 0.0, 0.0, 0.0

    def add(self, n_in: float, n_out: float, hit: float) -> None:
        self.n += 1
        self.sum_in += n_in
        self.sum_out += n_out
        self.sum_new += (1.0 - hit) * n_in

    def absorb(self, other: _Bucket) -> None:
        self.lo, self.hi = min(self.lo, other.lo), max(self.hi, other.hi)
        self.n += other.n
        self.sum_in += other.sum_in
        self.sum_out += other.sum_out
        self.sum_new += other.sum_new

    def to_class(self, name: str, total: int) -> RequestClass:
        hit = 1.0 - self.sum_new / self.sum_in if self.sum_in > 0 else 0.0
        return RequestClass(
            name=name, share=self.n / total,
            input_tokens=max(1, round(self.sum_in / self.n)),
            output_tokens=max(1, round(self.sum_out / self.n)),
            hit_rate=min(1.0, max(0.0, round(hit, 6))),
        )


def _pct(x: float) -> str:
    return f"{100 * x:g}"


def fit_classes(records: Iterable[object], min_share: float = 0.02,
                filter_max_output_tokens: int = DEFAULT_FILTER.max_output_tokens,
                filter_max_hit_rate: float = DEFAULT_FILTER.max_hit_rate,
                filter_min_input_tokens: int = DEFAULT_FILTER.min_input_tokens) -> list[RequestClass]:
    """Request classes (shares sum to 1) that summarise ``records``.

    ``records`` are objects or dicts with ``input_tokens``, ``output_tokens`` and
    ``hit_rate``; the anomalous-traffic thresholds default to the scenario options'.
    """
    if not 0 <= min_share < 0.5:
        raise InputError(f"min_share must be in [0, 0.5), got {min_share}")
    rule = FilterRule(filter_min_input_tokens, filter_max_hit_rate, filter_max_output_tokens)
    buckets = [_Bucket(lo, hi) for lo, hi in zip(HIT_EDGES, HIT_EDGES[1:])]
    anomalous = _Bucket(0.0, filter_max_hit_rate)
    total = 0
    for rec in records:
        n_in, n_out, hit = _field(rec, "input_tokens"), _field(rec, "output_tokens"), _field(rec, "hit_rate")
        if n_in <= 0:
            raise InputError(f"request record has input_tokens {n_in}; it must be > 0")
        if not 0.0 <= hit <= 1.0:
            raise InputError(f"request record has hit_rate {hit}; it must be in [0, 1]")
        total += 1
        if rule.is_filtered(n_in, hit, n_out):
            anomalous.add(n_in, n_out, hit)
            continue
        i = len(buckets) - 1
        while i > 0 and hit < buckets[i].lo:
            i -= 1
        buckets[i].add(n_in, n_out, hit)
    if total == 0:
        raise InputError("no requests to fit classes to (empty trace or log)")

    kept = [b for b in buckets if b.n > 0]
    # merge buckets below min_share into their neighbour (the smaller of the two), smallest first
    while len(kept) > 1:
        small = min(range(len(kept)), key=lambda i: kept[i].n)
        if kept[small].n >= min_share * total:
            break
        if small == 0:
            j = 1
        elif small == len(kept) - 1:
            j = small - 1
        else:
            j = small - 1 if kept[small - 1].n <= kept[small + 1].n else small + 1
        kept[j].absorb(kept[small])
        del kept[small]
    classes = [b.to_class(f"hit-{_pct(b.lo)}-{_pct(b.hi)}", total) for b in kept]
    if anomalous.n > 0:
        if anomalous.n >= min_share * total or not classes:
            classes.insert(0, anomalous.to_class("anomalous", total))
        else:  # too rare for its own class: fold into the lowest bucket
            kept[0].absorb(anomalous)
            classes[0] = kept[0].to_class(classes[0].name, total)
    return _exact_shares(classes)


def _exact_shares(classes: list[RequestClass]) -> list[RequestClass]:
    """Round shares to 6 digits, keeping their sum exactly 1 (the largest absorbs the rest)."""
    shares = [round(c.share, 6) for c in classes]
    big = max(range(len(shares)), key=lambda i: shares[i])
    shares[big] = round(1.0 - sum(s for i, s in enumerate(shares) if i != big), 6)
    return [c.model_copy(update={"share": s}) for c, s in zip(classes, shares)]


def classes_from_trace(path: str | Path, limit: int | None = None) -> list[RequestClass]:
    """Read a JSONL trace (hit rates derived from hash_ids where given) and fit classes."""
    from placer.workload.trace import read_trace, with_hit_rates

    return fit_classes(with_hit_rates(read_trace(path, limit)))


def trace_arrival_rps(path: str | Path, limit: int | None = None) -> float:
    """Mean request rate of a trace: (requests − 1) / (last − first timestamp)."""
    from placer.workload.trace import read_trace

    first = last = None
    count = 0
    for rec in read_trace(path, limit):
        first = rec.timestamp_s if first is None else first
        last = rec.timestamp_s
        count += 1
    if count < 2 or last <= first:
        raise InputError(f"trace {str(path)!r}: needs two or more requests at different timestamps for a rate")
    return (count - 1) / (last - first)
