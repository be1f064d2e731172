"""Bucket observed requests into the planner's request classes.

in:  records (objects or dicts) with ``input_tokens``, ``output_tokens``, ``hit_rate`` —
     trace records, or the service's request log (the replanning jobs call
     :func:`fit_classes` on it); or a trace path (:func:`classes_from_trace`)
out: ``list[RequestClass]`` whose shares sum to 1, ready for a scenario's
     ``workload.classes``; a trace's arrival rate and variability (:func:`trace_arrival_rps`,
     :func:`trace_arrival_cv2`: gaps, or counts per bin where its timestamps are binned; per window:
     :func:`window_arrival_cv2`).

Rules:

* **anomalous**: what :class:`placer.flows.FilterRule` filters — long input
  (≥ ``filter_min_input_tokens``), low hit (< ``filter_max_hit_rate``), short output
  (< ``filter_max_output_tokens``), the traffic the PDD filter may finish on
  RelayDecode — gets its own class.
* the rest go into hit-rate buckets (finer near 1, where agentic traffic lives); a
  bucket under ``min_share`` of the requests merges into its neighbour.
* **the tail** (issue 42): a P queue waits by E[S²], the second moment of prefill time, and a
  trace's few very long prompts make most of it. Classes are cut by new tokens — each step
  the class whose mean loses the most of Σ n² (n = new tokens, at least a forward's floor),
  at its best two-way cut — until the means keep all but ``TAIL_TOLERANCE`` of it, each
  piece at least ``TAIL_MIN_SHARE`` of the requests, at most ``MAX_CLASSES`` classes.
* requests then move to the class a router that sees their hit and lengths would send them
  as (:func:`class_distance`, the simulator's rule), so each class is the traffic its routes
  will carry; a class's name says where it began (hit bucket, new-token band), not a hard edge.
* a class's input and output are its mean lengths; its hit rate is the *token-weighted* hit,
  1 − Σ new tokens / Σ input tokens, so the class keeps its prefill work and the KV bytes
  that cross the WAN; the spread left inside it is ``new_tokens_cv2`` and
  ``output_tokens_cv2`` (variance / mean²), which :mod:`placer.queue_laws` prices.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from placer.errors import InputError
from placer.pdd import DEFAULT_FILTER, FilterRule
from placer.specs import RequestClass

#: Share of E[new tokens²] the classes' means may lose before a class is cut by length (the tail).
TAIL_TOLERANCE = 0.02
#: Least share of the requests a class cut for the tail holds.
TAIL_MIN_SHARE = 0.005
#: Most classes a fit makes by cutting for the tail (more hit buckets than this stay as they are).
MAX_CLASSES = 24
#: Prompts of fewer new tokens than this cost a P forward about the same (its weight read and fixed
#: costs dominate on every catalog chip), so the tail criterion counts them as this many.
FORWARD_FLOOR_TOKENS = 1024
#: Rounds of moving requests to the class a router would send them as (:func:`_as_routed`).
ROUTING_ROUNDS = 4
#: Weights of |Δ log input| and |Δ log output| beside |Δ hit| in :func:`class_distance` (the
#: simulator router's, ``placer.sim.router.Router.classify``).
DISTANCE_WEIGHTS = (0.25, 0.1)
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
    """Requests of one class in the making: (input, output, new tokens) of each; its hit range,
    its base name and, once cut by :func:`_hold_tails`, its new-token band [band_lo, band_hi)."""

    __slots__ = ("lo", "hi", "rows", "base", "band_lo", "band_hi", "_ss")

    def __init__(self, lo: float, hi: float, base: str = ""):
        self.lo, self.hi, self.base = lo, hi, base
        self.rows: list[tuple[float, float, float]] = []
        self.band_lo: float | None = None
        self.band_hi: float | None = None
        self._ss: float | None = None  # within_ss, once the rows are final

    @property
    def n(self) -> int:
        return len(self.rows)

    def add(self, n_in: float, n_out: float, hit: float) -> None:
        self.rows.append((n_in, n_out, (1.0 - hit) * n_in))
        self._ss = None

    def absorb(self, other: _Bucket) -> None:
        self.lo, self.hi = min(self.lo, other.lo), max(self.hi, other.hi)
        self.rows.extend(other.rows)
        self._ss = None

    def within_ss(self) -> float:
        """Σ (n − n̄)² of the requests' work n = max(new tokens, :data:`FORWARD_FLOOR_TOKENS`): the
        variance of prefill time the class's mean alone would lose."""
        if self._ss is None:
            self._ss = _ss([_work(r[2]) for r in self.rows])
        return self._ss

    def piece(self, rows: list, band_lo: float | None, band_hi: float | None) -> _Bucket:
        out = _Bucket(self.lo, self.hi, self.base)
        out.rows, out.band_lo, out.band_hi = rows, band_lo, band_hi
        return out

    @property
    def name(self) -> str:
        if self.band_lo is None and self.band_hi is None:
            return self.base
        if self.band_lo is None:
            return f"{self.base}-new-lt{_tokens(self.band_hi)}"
        if self.band_hi is None:
            return f"{self.base}-new-{_tokens(self.band_lo)}+"
        return f"{self.base}-new-{_tokens(self.band_lo)}-{_tokens(self.band_hi)}"

    def to_class(self, total: int) -> RequestClass:
        n = self.n
        sum_in = sum(r[0] for r in self.rows)
        sum_new = sum(r[2] for r in self.rows)
        hit = 1.0 - sum_new / sum_in if sum_in > 0 else 0.0
        outs = [r[1] for r in self.rows]
        return RequestClass(
            name=self.name, share=n / total,
            input_tokens=max(1, round(sum_in / n)),
            output_tokens=max(1, round(sum(outs) / n)),
            hit_rate=min(1.0, max(0.0, round(hit, 6))),
            new_tokens_cv2=round(_cv2([r[2] for r in self.rows]), 6),
            output_tokens_cv2=round(_cv2(outs), 6),
        )


def _work(new_tokens: float) -> float:
    """A prompt's prefill work in tokens: a forward shorter than the floor costs about the floor."""
    return max(new_tokens, FORWARD_FLOOR_TOKENS)


def _ss(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values)


def _cv2(values: list[float]) -> float:
    """Squared coefficient of variation (variance / mean²) of ``values``; 0 for one value."""
    mean = sum(values) / len(values)
    return _ss(values) / len(values) / (mean * mean) if mean > 0 else 0.0


def _tokens(n: float) -> str:
    return f"{n / 1000:.3g}K" if n >= 1000 else f"{n:.0f}"


def _best_split(bucket: _Bucket, min_rows: int) -> tuple[float, list, list] | None:
    """The cut of ``bucket`` by new tokens into two classes of at least ``min_rows`` requests each
    that leaves the least within-class Σ (new − mean)² (the 1-D optimal two-way split), or None."""
    rows = sorted(bucket.rows, key=lambda r: r[2])
    n, m = len(rows), max(1, min_rows)
    if n < 2 * m:
        return None
    prefix, prefix_sq = [0.0], [0.0]
    for r in rows:
        prefix.append(prefix[-1] + _work(r[2]))
        prefix_sq.append(prefix_sq[-1] + _work(r[2]) ** 2)

    def ss(a: int, b: int) -> float:  # of rows[a:b]
        s = prefix[b] - prefix[a]
        return prefix_sq[b] - prefix_sq[a] - s * s / (b - a)

    best = None
    for i in range(m, n - m + 1):
        if _work(rows[i][2]) == _work(rows[i - 1][2]):
            continue  # equal work stays together
        cost = ss(0, i) + ss(i, n)
        if best is None or cost < best[0]:
            best = (cost, i)
    if best is None:
        return None
    return rows[best[1]][2], rows[:best[1]], rows[best[1]:]


def _hold_tails(kept: list[_Bucket], tolerance: float, min_rows: int, max_classes: int) -> list[_Bucket]:
    """Split classes by new tokens until the classes' means keep all but ``tolerance`` of the
    requests' second moment of prefill work, E[n²] with n = max(new tokens, the forward floor)
    (what a P queue's M/G/1 wait is made of: E[S²], S ≈ prefill seconds, about proportional to n). Each step cuts the class that loses
    the most (its Σ (n − n̄)²) where the cut leaves least, into pieces of ``min_rows`` or more."""
    second = sum(_work(r[2]) ** 2 for b in kept for r in b.rows)
    stuck: set[int] = set()
    while second > 0 and len(kept) < max_classes:
        if sum(b.within_ss() for b in kept) <= tolerance * second:
            break
        open_ = [i for i in range(len(kept)) if id(kept[i]) not in stuck]
        if not open_:
            break
        i = max(open_, key=lambda j: kept[j].within_ss())
        cut = _best_split(kept[i], min_rows)
        if cut is None:
            stuck.add(id(kept[i]))
            continue
        at, low, high = cut
        b = kept[i]
        kept[i:i + 1] = [b.piece(low, b.band_lo, at), b.piece(high, at, b.band_hi)]
    return kept


def _pct(x: float) -> str:
    return f"{100 * x:g}"


def fit_classes(records: Iterable[object], min_share: float = 0.02,
                filter_max_output_tokens: int = DEFAULT_FILTER.max_output_tokens,
                filter_max_hit_rate: float = DEFAULT_FILTER.max_hit_rate,
                filter_min_input_tokens: int = DEFAULT_FILTER.min_input_tokens,
                tail_tolerance: float = TAIL_TOLERANCE, tail_min_share: float = TAIL_MIN_SHARE,
                max_classes: int = MAX_CLASSES, routing_rounds: int = ROUTING_ROUNDS) -> list[RequestClass]:
    """Request classes (shares sum to 1) that summarise ``records``.

    ``records`` are objects or dicts with ``input_tokens``, ``output_tokens`` and
    ``hit_rate``; the anomalous-traffic thresholds default to the scenario options'.
    The hit buckets are then cut by new tokens (:func:`_hold_tails`) until the classes' means
    keep all but ``tail_tolerance`` of E[new tokens²] (1: no cut), each piece at least
    ``tail_min_share`` of the requests, at most ``max_classes`` classes in all (or the buckets'
    count, if more); requests then move to the class a router sends them as (``routing_rounds``
    rounds of :func:`_as_routed`; 0: none). Each class carries the spread left within it as
    ``new_tokens_cv2`` and ``output_tokens_cv2``.
    """
    if not 0 <= min_share < 0.5:
        raise InputError(f"min_share must be in [0, 0.5), got {min_share}")
    if not 0 < tail_tolerance <= 1:
        raise InputError(f"tail_tolerance must be in (0, 1], got {tail_tolerance}")
    if not 0 <= tail_min_share < 0.5:
        raise InputError(f"tail_min_share must be in [0, 0.5), got {tail_min_share}")
    if max_classes < 1:
        raise InputError(f"max_classes must be at least 1, got {max_classes}")
    rule = FilterRule(filter_min_input_tokens, filter_max_hit_rate, filter_max_output_tokens)
    buckets = [_Bucket(lo, hi) for lo, hi in zip(HIT_EDGES, HIT_EDGES[1:])]
    anomalous = _Bucket(0.0, filter_max_hit_rate, "anomalous")
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
    for b in kept:
        b.base = f"hit-{_pct(b.lo)}-{_pct(b.hi)}"
    if anomalous.n > 0:
        if anomalous.n >= min_share * total or not kept:
            kept.insert(0, anomalous)
        else:  # too rare for its own class: fold into the lowest bucket
            kept[0].absorb(anomalous)
    pieces = _hold_tails(kept, tail_tolerance, math.ceil(tail_min_share * total), max(max_classes, len(kept)))
    return _exact_shares([p.to_class(total) for p in _as_routed(pieces, total, routing_rounds)])


def _as_routed(pieces: list[_Bucket], total: int, rounds: int) -> list[_Bucket]:
    """The classes as a router that sees a request's hit and lengths forms them: each request moved
    to the class nearest it by :func:`class_distance` (the simulator's rule for a trace's requests,
    ``placer.sim.router.Router.classify``), the classes' figures recomputed, ``rounds`` times at
    most (Lloyd's iteration). A class is then the requests that will be served as it, so the plan
    sizes each route for the traffic it gets; classes left empty go."""
    w_in, w_out = DISTANCE_WEIGHTS
    for _ in range(rounds):
        centers = []
        for b in pieces:
            c = b.to_class(total)
            centers.append((c.hit_rate, math.log(c.input_tokens), math.log(c.output_tokens)))
        moved: list[list] = [[] for _ in pieces]
        changed = False
        for k, b in enumerate(pieces):
            for row in b.rows:
                n_in, n_out, new = row
                hit, log_in, log_out = 1.0 - new / n_in, math.log(max(n_in, 1)), math.log(max(n_out, 1))
                best, best_d = k, math.inf
                for j, (c_hit, c_in, c_out) in enumerate(centers):  # class_distance, inlined: the hot loop
                    d = abs(c_hit - hit) + w_in * abs(c_in - log_in) + w_out * abs(c_out - log_out)
                    if d < best_d:
                        best, best_d = j, d
                changed |= best != k
                moved[best].append(row)
        pieces = [b.piece(rows, b.band_lo, b.band_hi) for b, rows in zip(pieces, moved) if rows]
        if not changed:
            break
    return pieces


def class_distance(center: tuple[float, float, float], request: tuple[float, float, float]) -> float:
    """How far a request (hit, log input, log output) is from a class (the same, its figures):
    hit first, then lengths (:data:`DISTANCE_WEIGHTS`) — the rule the simulator's router
    classifies a trace's requests by (``placer.sim.router.Router.classify``)."""
    w_in, w_out = DISTANCE_WEIGHTS
    return abs(center[0] - request[0]) + w_in * abs(center[1] - request[1]) + w_out * abs(center[2] - request[2])


def _exact_shares(classes: list[RequestClass]) -> list[RequestClass]:
    """Round shares to 6 digits, keeping their sum exactly 1 (the largest absorbs the rest)."""
    shares = [round(c.share, 6) for c in classes]
    big = max(range(len(shares)), key=lambda i: shares[i])
    shares[big] = round(1.0 - sum(s for i, s in enumerate(shares) if i != big), 6)
    return [c.model_copy(update={"share": s}) for c, s in zip(classes, shares)]


def classes_from_trace(path: str | Path, limit: int | None = None,
                       cache_tokens: int | None = None) -> list[RequestClass]:
    """Read a JSONL trace (hit rates derived from hash_ids where given, under a prefix cache of
    ``cache_tokens``, None: unbounded) and fit classes."""
    from placer.workload.trace import read_trace, with_hit_rates

    return fit_classes(with_hit_rates(read_trace(path, limit), cache_tokens))


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


def trace_arrival_cv2(path: str | Path, limit: int | None = None) -> tuple[float, str]:
    """(arrival cv², how it was measured) of a trace, for ``workload.arrival_cv2``.

    A trace whose timestamps sit on a grid of bins (:func:`~placer.workload.arrivals.bin_width_s`: the
    Mooncake traces count arrivals in 3-second bins) records how many requests came in each bin, not
    when — its gaps are the grid's — so its variability is the dispersion of the counts per bin
    (:func:`~placer.workload.arrivals.count_dispersion`, ``"counts per {bin} s bin"``); any other trace's
    is its gaps' cv² (:func:`~placer.workload.arrivals.interarrival_cv2`, ``"gaps"``)."""
    from placer.workload.arrivals import bin_width_s
    from placer.workload.trace import read_trace

    times = [rec.timestamp_s for rec in read_trace(path, limit)]
    return arrival_cv2_of(times, bin_width_s(sorted(set(times)), len(times)))


def arrival_cv2_of(times_s: list[float], bin_s: float) -> tuple[float, str]:
    """(arrival cv², how it was measured) of arrival times: the dispersion of their counts per ``bin_s``
    bin where the times are binned (``bin_s`` > 0), else their gaps' cv² (:func:`trace_arrival_cv2`)."""
    from placer.workload.arrivals import count_dispersion, interarrival_cv2

    if bin_s > 0:
        return count_dispersion(times_s, bin_s), f"counts per {bin_s:g} s bin"
    return interarrival_cv2(times_s), "gaps"


def window_arrival_cv2(path: str | Path, window_s: float) -> dict[int, float]:
    """Each ``window_s`` window's arrival cv² (window index from the first request → cv², :func:`arrival_cv2_of`:
    counts per bin where the whole trace is binned, else gaps), for the windows with enough arrivals."""
    from placer.workload.arrivals import bin_width_s
    from placer.workload.trace import read_trace

    times = [rec.timestamp_s for rec in read_trace(path)]
    bin_s = bin_width_s(sorted(set(times)), len(times))
    groups: dict[int, list[float]] = {}
    for t in times:
        groups.setdefault(int((t - times[0]) // window_s), []).append(t)
    out = {}
    for k, group in groups.items():
        try:
            out[k] = arrival_cv2_of(group, bin_s)[0]
        except InputError:
            continue
    return out
