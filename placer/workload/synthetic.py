"""Workload sources for the simulator: request classes, agentic sessions, traces.

in:  request classes (shares, lengths, hit rates) + an arrival process, or a trace
out: an iterator of *work items*, increasing in time, each a tuple
     ``(arrival_s, class_index, input_tokens, output_tokens, hit_rate, hash_ids)``:

* :func:`class_requests` — i.i.d. requests drawn from the classes by share, arriving as a renewal
  process (Poisson, or gamma gaps of the scenario's ``arrival_cv2``) or in bursts; the hit
  rate is the class's (``class_index`` ≥ 0, ``hash_ids`` None); lengths are the class's,
  or, for a class with a spread (``new_tokens_cv2``, ``output_tokens_cv2``), lognormal
  around them with that variance / mean² (new tokens behind the class's cached prefix).
* :class:`AgenticSessions` — multi-turn agentic sessions: each turn re-sends a prefix
  of the session's history (a shared agent context plus the session's earlier turns
  and outputs) and appends new tokens; the prefix length follows the hit rate of a
  class drawn by share, so a cache that keeps the history reproduces the classes'
  hit histogram, and hits come from real cache state (``hash_ids`` set, ``hit_rate``
  None: the simulator's caches decide). Sessions start in bursts (optional).
* :func:`trace_requests` — a JSONL trace replayed at its own timestamps.

Work items stay small tuples and are generated lazily: memory does not grow with the
number of requests.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

from placer.fields import MAX_TOKENS
from placer.queueing import spread_prompt
from placer.workload.arrivals import Burstiness, arrivals
from placer.workload.trace import BLOCK_TOKENS, read_trace

WorkItem = tuple  # (arrival_s, class_index, input_tokens, output_tokens, hit_rate | None, hash_ids | None)


def _cumulative(shares: Sequence[float]) -> list[float]:
    acc, out = 0.0, []
    for s in shares:
        acc += s
        out.append(acc)
    out[-1] = float("inf")  # rounding never falls off the end
    return out


def class_requests(classes: Sequence, rate_rps: float, rng: random.Random, kind: str = "poisson",
                   burstiness: Burstiness | None = None, arrival_cv2: float = 1.0) -> Iterator[WorkItem]:
    """Endless i.i.d. requests from ``classes`` (objects with share/input_tokens/output_tokens/hit_rate,
    and optionally ``new_tokens_cv2`` / ``output_tokens_cv2``: lengths then lognormal with the class's
    mean and that variance / mean² — a prompt's new tokens behind the class's cached prefix (:func:`_spread_new`); a class without a spread draws nothing more from ``rng``), arriving
    as ``kind`` (poisson: a renewal process of gap cv² ``arrival_cv2``, :func:`~placer.workload.arrivals.arrivals`)."""
    cum = _cumulative([c.share for c in classes])
    table = [(k, c.input_tokens, c.output_tokens, c.hit_rate, _sigma(c, "new_tokens_cv2"),
              _sigma(c, "output_tokens_cv2")) for k, c in enumerate(classes)]
    pick = bisect.bisect_right
    rand = rng.random
    for t in arrivals(kind, rate_rps, rng, burstiness, arrival_cv2):
        k, n_in, n_out, hit, s_in, s_out = table[pick(cum, rand())]
        if s_in > 0.0:
            n_in, hit = _spread_new(n_in, hit, s_in, rng)
        if s_out > 0.0:
            n_out = _spread(n_out, s_out, rng)
        yield (t, k, n_in, n_out, hit, None)


def _sigma(c: object, field: str) -> float:
    """σ of the lognormal with mean 1 and variance ``c.<field>`` (0 where the class has none)."""
    cv2 = getattr(c, field, 0.0) or 0.0
    return math.sqrt(math.log1p(cv2)) if cv2 > 0 else 0.0


def _spread_new(n_in: int, hit: float, sigma: float, rng: random.Random) -> tuple[int, float]:
    """(input tokens, hit rate) of a prompt whose new tokens are drawn lognormal around its class's (mean
    kept, log-σ ``sigma``) behind the class's cached prefix (:func:`placer.queueing.spread_prompt`, the rule
    the P-queue laws price), within [1, MAX_TOKENS]; a class without hits draws its whole prompt so."""
    factor = math.exp(sigma * rng.gauss(0.0, 1.0) - sigma * sigma / 2)
    drawn, _ = spread_prompt(n_in, hit, factor)
    out = min(MAX_TOKENS, max(1, round(drawn)))
    return out, (min(1.0, n_in * hit / out) if hit > 0.0 else hit)


def _spread(mean: int, sigma: float, rng: random.Random) -> int:
    """A length drawn lognormal around ``mean`` (mean kept) with log-σ ``sigma``, within [1, MAX_TOKENS]."""
    return min(MAX_TOKENS, max(1, round(mean * math.exp(sigma * rng.gauss(0.0, 1.0) - sigma * sigma / 2))))


def trace_requests(path: str | Path, limit: int | None = None, time_scale: float = 1.0) -> Iterator[WorkItem]:
    """A trace's requests at their timestamps (shifted to start at 0, divided by ``time_scale``)."""
    first = None
    for rec in read_trace(path, limit):
        first = rec.timestamp_s if first is None else first
        t = (rec.timestamp_s - first) / time_scale
        yield (t, -1, rec.input_tokens, rec.output_tokens, rec.hit_rate, rec.hash_ids)


class AgenticSessions:
    """Multi-turn agentic sessions whose prefix hits arise from their history.

    * Sessions start at rate ``rate_rps / mean_turns`` (Poisson or bursty); each has a
      geometric number of turns (mean ``mean_turns``) separated by exponential think
      times (mean ``think_s``); the stream starts in steady state (sessions already
      under way), so requests arrive at ``rate_rps`` from the first second.
    * Every session opens on one of ``shared_contexts`` agent contexts (system prompt,
      tool definitions, repository), which many sessions share.
    * A session keeps its class from turn to turn with probability ``class_persistence``
      and otherwise draws one by share (so the classes' shares hold over all turns); its
      prompt is the first ⌊hit × input / 512⌉ blocks of the session's history (at least one
      block is new) followed by new blocks up to the class's input length; afterwards the
      history is that prompt plus the turn's output. A session that changes class also
      changes pipeline, and a decode side it did not pass through lacks its latest blocks.
    """

    def __init__(self, classes: Sequence, rate_rps: float, seed: int = 0, mean_turns: float = 20.0,
                 think_s: float = 10.0, shared_contexts: int = 16, kind: str = "poisson",
                 burstiness: Burstiness | None = None, block_tokens: int = BLOCK_TOKENS,
                 class_persistence: float = 0.95):
        from placer.errors import InputError

        if mean_turns < 1:
            raise InputError(f"mean_turns must be >= 1, got {mean_turns}")
        if think_s < 0:
            raise InputError(f"think_s must be >= 0, got {think_s}")
        if not 0 <= class_persistence <= 1:
            raise InputError(f"class_persistence must be in [0, 1], got {class_persistence}")
        self.class_persistence = class_persistence
        self.classes = list(classes)
        self.rate_rps = rate_rps
        self.seed = seed
        self.mean_turns = mean_turns
        self.think_s = think_s
        self.shared_contexts = max(1, shared_contexts)
        self.kind = kind
        self.burstiness = burstiness
        self.block_tokens = block_tokens

    def shared_prefixes(self) -> list[tuple[int, ...]]:
        """The shared agent contexts' blocks: what caches of a running service already hold."""
        longest = max(math.ceil(c.input_tokens / self.block_tokens) for c in self.classes)
        return [tuple(range(1 + b * longest, 1 + (b + 1) * longest)) for b in range(self.shared_contexts)]

    def __iter__(self) -> Iterator[WorkItem]:
        rng = random.Random(self.seed)
        cum = _cumulative([c.share for c in self.classes])
        bt = self.block_tokens
        # shared contexts: block ids 1..; session blocks are numbered after them
        bases = [list(b) for b in self.shared_prefixes()]
        fresh = itertools.count(1 + sum(len(b) for b in bases))
        starts = arrivals(self.kind, self.rate_rps / self.mean_turns, rng, self.burstiness)
        p_more = 1.0 - 1.0 / self.mean_turns  # geometric number of turns
        pending: list = []  # (time, seq, history, turns_left, class)
        seq = itertools.count()
        if self.think_s > 0:
            # start in steady state: sessions already under way (turns and think times are
            # memoryless, so their next turns and remaining turns follow the same laws)
            for _ in range(round(self.rate_rps * p_more * self.think_s)):
                turns_left = 1
                while rng.random() < p_more:
                    turns_left += 1
                history = bases[int(rng.random() * self.shared_contexts)]
                k = bisect.bisect_right(cum, rng.random())
                heapq.heappush(pending, (rng.expovariate(1.0 / self.think_s), next(seq), history, turns_left, k))
        next_start = next(starts)
        while True:
            if not pending or next_start <= pending[0][0]:
                history = bases[int(rng.random() * self.shared_contexts)]
                t, turns_left = next_start, 1
                while rng.random() < p_more:
                    turns_left += 1
                next_start = next(starts)
                k = bisect.bisect_right(cum, rng.random())
            else:
                t, _, history, turns_left, k = heapq.heappop(pending)
                if rng.random() >= self.class_persistence:
                    k = bisect.bisect_right(cum, rng.random())
            c = self.classes[k]
            blocks = math.ceil(c.input_tokens / bt)
            reuse = min(blocks - 1, len(history), round(c.hit_rate * c.input_tokens / bt))
            prompt = history[:reuse]
            prompt.extend(next(fresh) for _ in range(blocks - reuse))
            yield (t, k, c.input_tokens, c.output_tokens, None, tuple(prompt))
            if turns_left > 1:
                prompt.extend(next(fresh) for _ in range(math.ceil(c.output_tokens / bt)))
                think = rng.expovariate(1.0 / self.think_s) if self.think_s > 0 else 0.0
                heapq.heappush(pending, (t + think, next(seq), prompt, turns_left - 1, k))
