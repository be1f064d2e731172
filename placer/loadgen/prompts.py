"""The bench's requests: a scenario's classes (or a trace) → timed requests with prompts an endpoint can cache.

in:  the resolved classes (``placer.problem.Class``: share, input/output tokens, hit rate) and an arrival
     rate, or a trace's records (``placer.workload.trace.TraceRecord``); a seed; the count and time bounds
out: :class:`BenchRequest` items in arrival order (generated lazily: a prompt is built only when its
     request is sent, so a long run holds no prompts in memory) and :func:`prompt_text`

Prefix caching. Each class has ``sessions`` sessions; a session owns a prefix of ``round(hit_rate ×
input_tokens)`` units, and every request of the class goes to one of its sessions (round robin): its
prompt is the session's prefix, then units of its own. The endpoint's prefix cache therefore sees the
class's hit rate on every request after a session's first (:func:`warmup_requests` sends those firsts
before the clock starts). A trace's ``hash_ids`` become blocks of ``BLOCK_TOKENS`` units, one text per
hash id, so two requests share exactly the blocks the trace says they share; a trace's ``hit_rate``
lines share one prefix per trace (as the classes' one session). The texts come from the run's seed and
a nonce drawn per run (``run_bench``), so a rerun does not find the last run's prompts in the cache.

Units and tokens. A prompt is ``input_tokens`` units of text:
* ``byte`` (default): one ASCII letter per unit — one token each under the executor's byte tokenizer
  (``executor.engine.tokenizer.ByteTokenizer``, which adds a BOS: the server counts one more);
* ``word``: one space-led common English word per unit — one token each under the BPE tokenizers of
  Llama, Qwen and GPT models (close, not exact: the server's ``usage.prompt_tokens`` is what the request
  log records when the server reports it).
Outputs: ``max_tokens`` = the class's output tokens with ``ignore_eos`` and ``min_tokens`` (vLLM,
SGLang and the executor honour them), so every request decodes its full length.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from placer.workload.arrivals import poisson_arrivals
from placer.workload.trace import BLOCK_TOKENS

UNITS = ("byte", "word")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: space-led words that BPE vocabularies (Llama 3, Qwen 2/3, GPT-4's cl100k) hold as one token each
_WORDS = tuple(" " + w for w in (
    "the of and to in is was for on as with by at from his her he she it they we you are be this that "
    "which not or have had has one all were their an but would there what so up out if about who when "
    "time can said will more no some them other than then now only new like made over such first two "
    "make way could these people may very years most after into also"
).split())


@dataclass(frozen=True)
class BenchRequest:
    """One request to send: when, how long, which class and session (its prompt is built on demand)."""

    index: int
    arrival_s: float  # seconds after the run's start
    input_tokens: int  # prompt units (tokens, see the module docstring)
    output_tokens: int
    hit_tokens: int  # the shared prefix's units: what the endpoint's cache can hit
    request_class: str | None
    session: str  # the prefix's key: requests of one session share its first hit_tokens units
    hash_ids: tuple[int, ...] | None = None  # a trace's prefix blocks (then session is unused)


def _units(rng: random.Random, n: int, unit: str) -> list[str]:
    return rng.choices(_LETTERS if unit == "byte" else _WORDS, k=n)


class PromptBuilder:
    """Prompt texts for :class:`BenchRequest` items; a session's prefix (or a hash id's block) is built once."""

    def __init__(self, seed: int | str = 0, unit: str = "byte", max_cached: int = 4096) -> None:
        self.seed, self.unit, self.max_cached = seed, unit, max_cached  # seed: the run's seed and nonce
        self._prefixes: dict[str, list[str]] = {}

    def _prefix(self, key: str, n: int) -> list[str]:
        """``n`` units, the same for every call with this ``key`` and ``n``."""
        key = f"{key}/{n}"
        units = self._prefixes.get(key)
        if units is None:
            units = _units(random.Random(f"{self.seed}/{key}"), n, self.unit)
            if len(self._prefixes) >= self.max_cached:
                self._prefixes.pop(next(iter(self._prefixes)))
            self._prefixes[key] = units
        return units

    def text(self, req: BenchRequest) -> str:
        """The prompt of ``req``: its shared units, then its own (``input_tokens`` units in all)."""
        own = random.Random(f"{self.seed}/request/{req.index}")
        if req.hash_ids is not None:
            shared = [u for h in req.hash_ids for u in self._prefix(f"block/{h}", BLOCK_TOKENS)][:req.input_tokens]
        else:
            shared = self._prefix(req.session, req.hit_tokens) if req.hit_tokens else []
        return "".join(shared) + "".join(_units(own, req.input_tokens - len(shared), self.unit))


def class_requests(classes: Iterable, rate_rps: float, seed: int, count: int, duration_s: float | None,
                   sessions: int = 4) -> Iterator[BenchRequest]:
    """``count`` requests (fewer if ``duration_s`` ends first) drawn i.i.d. by class share at Poisson
    arrivals of ``rate_rps``; each class's requests take its ``sessions`` sessions in turn."""
    classes = list(classes)
    rng = random.Random(f"{seed}/classes")
    shares = [c.share for c in classes]
    turn = {c.name: 0 for c in classes}
    times = poisson_arrivals(rate_rps, random.Random(f"{seed}/arrivals"))
    for index in range(count):
        t = next(times)
        if duration_s is not None and t > duration_s:
            return
        c = rng.choices(classes, weights=shares)[0]
        s = turn[c.name] % sessions
        turn[c.name] += 1
        hit = min(c.input_tokens, round(c.hit_rate * c.input_tokens))
        yield BenchRequest(index, t, c.input_tokens, max(1, c.output_tokens), hit, c.name, f"{c.name}/{s}")


def trace_requests(records: Iterable, count: int, duration_s: float | None,
                   time_scale: float = 1.0) -> Iterator[BenchRequest]:
    """A trace's records as requests at their own (relative) times divided by ``time_scale``."""
    t0 = None
    for index, rec in enumerate(records):
        if index >= count:
            return
        t0 = rec.timestamp_s if t0 is None else t0
        t = (rec.timestamp_s - t0) / time_scale
        if duration_s is not None and t > duration_s:
            return
        hit = 0 if rec.hit_rate is None else min(rec.input_tokens, round(rec.hit_rate * rec.input_tokens))
        yield BenchRequest(index, t, rec.input_tokens, max(1, rec.output_tokens), hit, None, "trace",
                           rec.hash_ids)


def warmup_requests(requests: Iterable[BenchRequest]) -> list[BenchRequest]:
    """One short request per session that has a prefix (its first): sent before the measured run so
    that the endpoint's cache already holds each prefix, as in the steady state the scenario describes."""
    seen: dict[str, BenchRequest] = {}
    for r in requests:
        if r.hash_ids is None and r.hit_tokens > 0 and r.session not in seen:
            seen[r.session] = BenchRequest(-1 - len(seen), 0.0, r.hit_tokens, 1, r.hit_tokens, r.request_class,
                                           r.session)
    return list(seen.values())
