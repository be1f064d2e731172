"""Where a run's requests come from: the workload the config names, at the plan's load.

in:  the Problem, the Router (which classes the plan serves, at what rates), a SimConfig
out: an iterator of work items ``(arrival_s, class_index, input, output, hit, hash_ids)``
     (class_index −1: the engine classifies by hit) and the offered rate.

* ``classes`` — i.i.d. draws of the classes the plan serves, in the plan's proportions,
  Poisson or bursty, at ``load_rps`` or the plan's carried load.
* ``agentic`` — multi-turn sessions over the same classes; hits come from the caches.
* ``trace`` — a JSONL trace at its own timestamps (÷ ``trace_time_scale``).
"""

from __future__ import annotations

import random


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


def work_items(problem, router, cfg):
    """(iterator of work items, offered req/s, prefixes every cache starts with) for one run.

    Agentic sessions start in steady state, so the caches start warm with the shared agent
    contexts; a trace starts cold, as its recording did.
    """
    served = [k for k in range(len(problem.classes)) if router.served[k]]
    total = sum(router.class_rps[k] for k in served)
    classes = [_Served(router.class_rps[k] / total, problem.classes[k], k) for k in served]
    rate = cfg.load_rps or router.total_rps
    warm = []
    if cfg.workload == "agentic":
        warm = _sessions(classes, rate, cfg).shared_prefixes()
    return _items(classes, rate, cfg), rate, warm


def _sessions(classes, rate, cfg):
    from placer.workload.synthetic import AgenticSessions

    return AgenticSessions(classes, rate, seed=sub_seed(cfg.seed, 0), mean_turns=cfg.mean_turns,
                           think_s=cfg.think_s, kind=cfg.arrivals, burstiness=cfg.burstiness,
                           class_persistence=cfg.class_persistence)


def _items(classes, rate, cfg):
    if cfg.workload == "classes":
        from placer.workload.synthetic import class_requests

        index = [c.index for c in classes]
        rng = random.Random(sub_seed(cfg.seed, 0))
        for t, k, n_in, n_out, hit, ids in class_requests(classes, rate, rng, cfg.arrivals, cfg.burstiness):
            yield (t, index[k], n_in, n_out, hit, ids)
    elif cfg.workload == "agentic":
        for t, _k, n_in, n_out, hit, ids in _sessions(classes, rate, cfg):
            yield (t, -1, n_in, n_out, hit, ids)
    else:
        from placer.workload.synthetic import trace_requests

        yield from trace_requests(cfg.trace, cfg.requests, cfg.trace_time_scale)
