"""Where a run's requests come from: the workload the config names, at the plan's load.

in:  the Problem, the Router (which classes the plan serves, at what rates), a SimConfig
out: an iterator of work items ``(arrival_s, class_index, input, output, hit, hash_ids)``
     (class_index −1: the engine classifies by hit) and the offered rate.

* ``classes`` — i.i.d. draws of the classes the plan serves, in the plan's proportions,
  at ``load_rps`` or the plan's carried load; Poisson, or — where the scenario's
  ``workload.arrival_cv2`` is not 1 — a renewal process with gamma gaps of that cv² (the
  arrivals the planner's G/G/1 law prices), or bursty (``SimConfig.arrivals``; it sets its
  own variability, so a scenario with ``arrival_cv2`` ≠ 1 rejects it: :func:`work_items`).
  Agentic sessions and traces keep their own times (``arrival_cv2`` unused).
* ``agentic`` — multi-turn sessions over the same classes; hits come from the caches.
* ``trace`` — a JSONL trace at its own timestamps (÷ ``trace_time_scale``). A trace whose
  timestamps are binned (:func:`trace_bin_s`: every distinct timestamp a whole number of bins
  after the first, with requests sharing them — the public Mooncake traces count arrivals in
  3-second bins) records how many requests came in each bin, not when; for Poisson arrivals,
  given their count in an interval, the times are i.i.d. uniform over it, so each request is
  replayed at a seeded uniform time within its bin (:func:`spread_in_bins`;
  ``SimConfig.spread_trace_bins`` False replays the bins' instants). Replaying a bin's requests
  all at one instant sends a burst of them into the same P queue at once, a queue the trace
  never recorded.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from placer.errors import InputError
from placer.workload.arrivals import BIN_MIN_GAPS, BIN_MIN_TIES, BIN_TOLERANCE, bin_width_s

__all__ = ["BIN_MIN_GAPS", "BIN_MIN_TIES", "BIN_PROBE", "BIN_TOLERANCE", "spread_in_bins", "sub_seed", "trace_bin_s",
           "work_items"]

#: Distinct timestamps read to find the bin (the rest of the trace is not read twice).
BIN_PROBE = 10_000


class _Served:
    """A class as the workload generators see it: its share of the plan's traffic."""

    __slots__ = ("share", "input_tokens", "output_tokens", "hit_rate", "index", "new_tokens_cv2", "output_tokens_cv2")

    def __init__(self, share, c, index):
        self.share, self.index = share, index
        self.input_tokens, self.output_tokens, self.hit_rate = c.input_tokens, c.output_tokens, c.hit_rate
        # the spread a fitted class keeps (placer.workload.fit): class_requests draws lengths with it
        self.new_tokens_cv2 = getattr(c, "new_tokens_cv2", 0.0)
        self.output_tokens_cv2 = getattr(c, "output_tokens_cv2", 0.0)


def sub_seed(seed: int, stream: int) -> int:
    """Independent, reproducible random streams per purpose (arrivals, routing, network)."""
    return (seed * 1_000_003 + stream * 7_919) & 0xFFFFFFFF


def count_lines(path: str, limit: int) -> int:
    """Requests in a trace, counting no further than ``limit``."""
    from placer.workload.trace import read_trace

    return sum(1 for _ in read_trace(path, limit))


def trace_bin_s(path: str, limit: int) -> float:
    """The bin width (s, trace time) of a trace whose timestamps are binned, else 0.

    Binned: among its first ``limit`` requests (at most :data:`BIN_PROBE` distinct timestamps),
    at least :data:`BIN_MIN_GAPS` gaps between distinct timestamps, every one a whole number of
    the median gap (the bin) within :data:`BIN_TOLERANCE` of a bin, and :data:`BIN_MIN_TIES` requests or more
    per distinct timestamp on average. A trace recorded at the arrivals' own resolution (ms
    timestamps of a live service) has gaps of every size and few ties: it is replayed as is."""
    from placer.workload.trace import read_trace

    stamps: list[float] = []
    requests = 0
    for rec in read_trace(path, limit):
        requests += 1
        if not stamps or rec.timestamp_s != stamps[-1]:
            if len(stamps) >= BIN_PROBE:
                break
            stamps.append(rec.timestamp_s)
    return bin_width_s(stamps, requests)


def spread_in_bins(items: Iterable[tuple], bin_s: float, rng: random.Random) -> Iterator[tuple]:
    """Work items ``(t, ...)`` of a binned trace, each moved to a uniform time in [t, t + ``bin_s``)
    and emitted in the order of those times (a bin's requests are buffered, the bins' order kept)."""
    group: list[tuple] = []
    start = None
    for item in items:
        if start is not None and item[0] != start:
            yield from sorted(group, key=lambda x: x[0])
            group = []
        start = item[0]
        group.append((item[0] + rng.random() * bin_s, *item[1:]))
    yield from sorted(group, key=lambda x: x[0])


def work_items(problem, router, cfg):
    """(iterator of work items, offered req/s, prefixes every cache starts with) for one run.

    Agentic sessions start in steady state, so the caches start warm with the shared agent
    contexts; a trace starts cold, as its recording did.
    """
    served = [k for k in range(len(problem.classes)) if router.served[k]]
    total = sum(router.class_rps[k] for k in served)
    classes = [_Served(router.class_rps[k] / total, problem.classes[k], k) for k in served]
    rate = cfg.load_rps or router.total_rps
    cv2 = getattr(problem, "arrival_cv2", 1.0)
    if cfg.workload == "classes" and cfg.arrivals == "bursty" and cv2 != 1.0:
        raise InputError(f"arrivals 'bursty' and the scenario's workload.arrival_cv2 = {cv2} both set the arrivals' "
                         "variability; replay with Poisson-based arrivals (the scenario's renewal process) or "
                         "set arrival_cv2 to 1 to replay bursts")
    warm = []
    if cfg.workload == "agentic":
        warm = _sessions(classes, rate, cfg).shared_prefixes()
    return _items(classes, rate, cfg, cv2), rate, warm


def _sessions(classes, rate, cfg):
    from placer.workload.synthetic import AgenticSessions

    return AgenticSessions(classes, rate, seed=sub_seed(cfg.seed, 0), mean_turns=cfg.mean_turns,
                           think_s=cfg.think_s, kind=cfg.arrivals, burstiness=cfg.burstiness,
                           class_persistence=cfg.class_persistence)


def _items(classes, rate, cfg, arrival_cv2=1.0):
    if cfg.workload == "classes":
        from placer.workload.synthetic import class_requests

        index = [c.index for c in classes]
        rng = random.Random(sub_seed(cfg.seed, 0))
        for t, k, n_in, n_out, hit, ids in class_requests(classes, rate, rng, cfg.arrivals, cfg.burstiness,
                                                                arrival_cv2):
            yield (t, index[k], n_in, n_out, hit, ids)
    elif cfg.workload == "agentic":
        for t, _k, n_in, n_out, hit, ids in _sessions(classes, rate, cfg):
            yield (t, -1, n_in, n_out, hit, ids)
    else:
        from placer.workload.synthetic import trace_requests

        items = trace_requests(cfg.trace, cfg.requests, cfg.trace_time_scale)
        bin_s = trace_bin_s(cfg.trace, cfg.requests) / cfg.trace_time_scale if cfg.spread_trace_bins else 0.0
        if bin_s > 0:
            items = spread_in_bins(items, bin_s, random.Random(sub_seed(cfg.seed, 3)))
        yield from items
