"""What a plan's decoders hold of a trace's prompts: the decode-side prefix hit its routing realises (issue 42).

in:  a trace's records (``hash_ids``), the classes a router sorts them into (their hit, input and output:
     the centres of :func:`placer.workload.fit.class_distance`) and each class's shares over the
     datacenters that decode it (:func:`destination_shares` of a plan)
out: :func:`routed_decode_hits` — per (class, destination) the requests, their input tokens, the tokens P's
     prefix store holds and the tokens the destination's decoders hold (:class:`DecodeHits`); and, for every
     destination the plan decodes at, the share of all the class's prompts its decoders hold where the class
     is sent there or not (:attr:`DecodeHits.held`: what a plan that moved the class there would find);
     :func:`held_hits` / :func:`with_held_hits` — those shares for a trace problem's own trace and a plan, as
     :attr:`placer.problem.Problem.decode_hits` takes them (the planner prices a route's KV at them:
     ``Problem.decode_hit``); :func:`routed_hits` — the same for any split of the classes (the LP relaxation's
     routing, :func:`placer.decode_rounds.lp_hits`)

The planner prices the KV a P-MD route sends over a line as the uncached part of the prompt,
(1 − hit)·input (``placer.flows.Route.wan_bytes``): it takes the decoder at the far end to hold what P's
prefix store holds. A conversation's turns climb the hit bands (each turn's prompt is the last one, its
answer and a new message), so a plan that routes classes by hit sends one conversation's turns to
different datacenters, and a decoder holds only the prompts of the turns decoded there. rnd-7-4-trace
(issue 42): the classes hit-80-90 … hit-95-97 cross dc1→dc0 planned at P's hit 0.85–0.96, while dc0's
decoder holds 0.28–0.40 of their prompts — their first turns, hit 0–10, decode in dc1 — so the line
carries 968 GB where the plan counts 721.

The replay: each request classed as the simulator's router classes it (the nearest class by its hit in
one unbounded store, P's), its destination drawn by its class's shares (seeded: the router's split), and
its decode-side hit the leading blocks of its prompt that the destination has seen — an unbounded store
per destination, the union of its decoders' caches (an upper bound on any one instance's); then its
prompt's blocks enter both stores.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

from placer.prefix import cached_tokens, leading_blocks
from placer.workload.fit import class_distance
from placer.workload.trace import BLOCK_TOKENS, read_trace


@dataclasses.dataclass
class DecodeHits:
    """Requests of one class sent to one destination: their count, input tokens, and the tokens of them P's
    prefix store and the destination's decoders hold; and of all the class's requests (sent anywhere) the input
    tokens and the tokens the destination's decoders hold when each arrives."""

    requests: int = 0
    input_tokens: int = 0
    p_hit_tokens: int = 0
    decode_hit_tokens: int = 0
    class_input_tokens: int = 0
    held_tokens: int = 0

    @property
    def p_hit(self) -> float:
        return self.p_hit_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def decode_hit(self) -> float:
        return self.decode_hit_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def held(self) -> float:
        """Token-weighted share of the class's prompts this destination's decoders hold, sent there or not."""
        return self.held_tokens / self.class_input_tokens if self.class_input_tokens else 0.0


def destination_shares(plan) -> dict[str, dict[str, float]]:
    """Class name → {destination datacenter: its share of the class's req/s} of a plan's routes."""
    rps: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in plan.routes:
        if r.rps > 0:
            rps[r.request_class][r.dst] += r.rps
    return {k: {d: x / sum(v.values()) for d, x in v.items()} for k, v in rps.items()}


def held_hits(problem, plan, seed: int = 0) -> dict[tuple[str, str], float]:
    """(class name, destination) → the token-weighted share of the class's prompts that destination's decoders
    hold (:attr:`DecodeHits.held`) when ``problem``'s trace (:attr:`placer.problem.Problem.trace`) is routed as
    ``plan`` splits each class, for every destination the plan decodes at; empty for a problem without a trace
    or without the decode-side cache (its routes send whole prompts)."""
    if problem.trace is None or not problem.options.drc:
        return {}
    return routed_hits(problem, read_trace(problem.trace), destination_shares(plan), seed)


def routed_hits(problem, records: Iterable, shares: dict[str, dict[str, float]],
                seed: int = 0) -> dict[tuple[str, str], float]:
    """(class name, destination) → :attr:`DecodeHits.held` of ``records`` routed by ``shares`` (class name →
    {destination: share}, :func:`destination_shares`'s form), for every destination that split decodes at."""
    hits = routed_decode_hits(records, problem.classes, shares, seed)
    return {key: h.held for key, h in sorted(hits.items())}


def with_held_hits(problem, plan, seed: int = 0):
    """``problem`` whose routes' KV is priced at what ``plan``'s routing leaves its decoders holding
    (:func:`held_hits` as :attr:`~placer.problem.Problem.decode_hits`); ``problem`` itself without a trace."""
    hits = held_hits(problem, plan, seed)
    return dataclasses.replace(problem, decode_hits=hits) if hits else problem


def routed_decode_hits(records: Iterable, classes: Sequence, shares: dict[str, dict[str, float]],
                       seed: int = 0) -> dict[tuple[str, str], DecodeHits]:
    """(class name, destination) → :class:`DecodeHits` of the trace ``records`` routed as the module says.

    ``classes``: objects with ``name``, ``hit_rate``, ``input_tokens``, ``output_tokens``; only those in
    ``shares`` (the classes a plan serves) take requests. Records without ``hash_ids`` are skipped."""
    served = [c for c in classes if shares.get(c.name)]
    rng = random.Random(seed)
    stores: dict[str, set] = {d: set() for split in shares.values() for d in split}
    out: dict[tuple[str, str], DecodeHits] = defaultdict(DecodeHits)
    for rec, k, p_hit in classed_records(records, served, hashed_only=True):
        ids, n_in = rec.hash_ids, rec.input_tokens
        name = served[k].name
        dst = _draw(shares[name], rng.random())
        for d, store in stores.items():
            row = out[(name, d)]
            held = cached_tokens(leading_blocks(ids, store), n_in, BLOCK_TOKENS)
            row.class_input_tokens += n_in
            row.held_tokens += held
            if d == dst:
                row.requests += 1
                row.input_tokens += n_in
                row.p_hit_tokens += p_hit
                row.decode_hit_tokens += held
        stores[dst].update(ids)
    return dict(out)


def classed_records(records: Iterable, classes: Sequence, hashed_only: bool = False) -> Iterator[tuple]:
    """(record, index in ``classes``, tokens P's prefix store holds of its prompt) of each trace record, classed as
    the simulator's router classes it: the nearest class by its hit in one unbounded store (P's; a record without
    ``hash_ids`` by its own ``hit_rate``, or skipped with ``hashed_only``), then its lengths
    (:func:`placer.workload.fit.class_distance`); its prompt's blocks then enter the store."""
    if not classes:
        return
    centers = [(c.hit_rate, math.log(max(c.input_tokens, 1)), math.log(max(c.output_tokens, 1))) for c in classes]
    p_store: set = set()
    for rec in records:
        ids, n_in = rec.hash_ids, rec.input_tokens
        if ids is None:
            if hashed_only:
                continue
            p_hit = round(rec.hit_rate * n_in)
        else:
            p_hit = cached_tokens(leading_blocks(ids, p_store), n_in, BLOCK_TOKENS)
            p_store.update(ids)
        seen = (p_hit / n_in, math.log(max(n_in, 1)), math.log(max(rec.output_tokens, 1)))
        yield rec, min(range(len(classes)), key=lambda j: class_distance(centers[j], seen)), p_hit


def _draw(split: dict[str, float], u: float) -> str:
    """The destination whose share interval (in name order) holds ``u`` ∈ [0, 1)."""
    acc = 0.0
    names = sorted(split)
    for d in names:
        acc += split[d]
        if u < acc:
            return d
    return names[-1]
