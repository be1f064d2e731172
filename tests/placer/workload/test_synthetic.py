"""Synthetic workloads: class draws, arrival processes, agentic sessions with real prefix reuse."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from placer.errors import InputError
from placer.specs import RequestClass
from placer.workload import AgenticSessions, Burstiness, class_requests
from placer.workload.arrivals import bursty_arrivals, poisson_arrivals
from placer.prefix import cached_tokens, leading_blocks
from placer.workload.trace import BLOCK_TOKENS

CLASSES = [
    RequestClass(name="hot", share=0.7, input_tokens=32768, output_tokens=512, hit_rate=0.98),
    RequestClass(name="warm", share=0.2, input_tokens=32768, output_tokens=512, hit_rate=0.9),
    RequestClass(name="cold", share=0.1, input_tokens=16384, output_tokens=256, hit_rate=0.3),
]


def _dispersion(times: list[float], window_s: float) -> float:
    counts = Counter(int(t / window_s) for t in times)
    n = [counts.get(i, 0) for i in range(int(times[-1] / window_s))]
    mean = sum(n) / len(n)
    return sum((x - mean) ** 2 for x in n) / len(n) / mean


def test_class_draws_follow_the_shares_at_the_rate(seed):
    items = list(itertools.islice(class_requests(CLASSES, 20.0, random.Random(seed)), 20_000))
    shares = Counter(k for _, k, *_ in items)
    for k, c in enumerate(CLASSES):
        assert shares[k] / len(items) == pytest.approx(c.share, abs=0.015)
    assert (len(items) - 1) / items[-1][0] == pytest.approx(20.0, rel=0.03)
    assert all(a[0] <= b[0] for a, b in zip(items, items[1:]))


def test_bursty_arrivals_keep_the_mean_rate_but_cluster(seed):
    poisson = list(itertools.islice(poisson_arrivals(10.0, random.Random(seed)), 30_000))
    bursty = list(itertools.islice(bursty_arrivals(10.0, random.Random(seed), Burstiness(4.0, 0.15, 1.0)), 60_000))
    assert (len(bursty) - 1) / bursty[-1] == pytest.approx(10.0, rel=0.1)
    assert _dispersion(poisson, 1.0) == pytest.approx(1.0, abs=0.15)
    assert _dispersion(bursty, 1.0) > 3.0
    with pytest.raises(InputError, match="quiet rate"):
        Burstiness(burst_factor=5.0, burst_time_fraction=0.3)


def test_agentic_sessions_reproduce_the_hit_histogram_from_their_history(seed):
    items = list(itertools.islice(AgenticSessions(CLASSES, 10.0, seed=seed, mean_turns=10), 8_000))
    assert all(a[0] <= b[0] for a, b in zip(items, items[1:]))
    seen: set[int] = set()
    hits: dict[int, list[float]] = {k: [] for k in range(len(CLASSES))}
    for i, (_, k, n_in, _, hit, ids) in enumerate(items):
        assert hit is None and len(ids) == -(-n_in // BLOCK_TOKENS)
        if i >= 1_000:  # once the shared contexts are warm
            hits[k].append(cached_tokens(leading_blocks(ids, seen), n_in, BLOCK_TOKENS) / n_in)
        seen.update(ids)
    counts = Counter(k for _, k, *_ in items)
    for k, c in enumerate(CLASSES):
        assert counts[k] / len(items) == pytest.approx(c.share, abs=0.03)
        # block granularity: the last block of the prompt is always new
        assert sum(hits[k]) / len(hits[k]) == pytest.approx(c.hit_rate, abs=BLOCK_TOKENS / c.input_tokens + 0.01)


def test_a_session_returns_to_its_own_history(seed):
    gen = AgenticSessions(CLASSES[:1], 1.0, seed=seed, mean_turns=50, think_s=1.0, shared_contexts=1)
    items = list(itertools.islice(gen, 200))
    shared = set(items[0][5][:1])
    own_blocks = Counter(b for *_, ids in items for b in ids if b not in shared)
    assert max(own_blocks.values()) > 5  # a session's own blocks come back turn after turn
