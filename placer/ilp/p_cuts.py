"""PDD's threshold-split P queues: a pool's "set" queues at the tail cuts of the classes' uncached lengths.

in:  a :class:`~placer.problem.Problem`, the classes late on every P instance for their prefill alone, a
     pool's heavy/light split sets and its set tiers (:mod:`placer.ilp.p_tiers` passes them), a model's
     tier columns (:func:`add_whole_sets`)
out: :func:`uncached_tokens`, :func:`threshold_sets` (the at/above-θ and below-θ sets of every cut, the
     highest first), :func:`tail_cuts` (how many of them are built), :func:`set_queues` (a pool's
     whole-instance "set" queues: admitted classes → utilisation tiers), :func:`add_whole_sets`, and
     :data:`SPLIT_NONE` / :data:`SPLIT_LIGHT` (+ c: and c cuts; how far the split goes) — read by
     :mod:`placer.ilp.p_tiers` and :mod:`placer.ilp.formulation`.

Why (issue 45): a prefill policy that sends every prompt of at least θ uncached tokens to one pool and the
rest to another (PrfaaS's rule; any threshold rule) runs each side's queue over the classes it admits, so
each side's M/G/1 law is its subset's. A pool's "mix" queue prices the whole class mix and its heavy/light
split sits at the chip's light line, not at an optimised θ: such a plan was not a PDD plan (the Mooncake
trace: prfaas 136.2 BCR, PDD 111.8). With K classes only the distinct uncached counts give different rules
(K + 1 cuts, the lowest and the one above the longest admitting everyone: the mix). For a cut θ each pool
gets an at/above-θ and a below-θ "set" queue, each its classes in proportion among themselves (C13), at
u·{1, .7, .45} (the fixed tiers of every grid, :func:`placer.ilp.p_tiers.tier_utilizations`), the set's
tiers together on whole instances (one integer column per set, :func:`add_whole_sets`: a set sharing an
instance with another queue would be one FCFS line its law does not see). A threshold plan at a built cut —
each side's P queues over its side's classes at those tiers, P remote and decode local being PDD's
cross-datacenter P-MD — is then a plan of PDD's model.

Which cuts are built: the tail cuts (:func:`tail_cuts`), the highest ones whose classes at or above θ are all
late on every P instance for their prefill alone (> the TTFT SLA). Their requests count against the late
budget wherever they go, so a threshold split moves their long prefills off the pools that serve the rest
on time onto the cheapest capacity (the Mooncake trace: its two longest classes, 98K and 85K uncached
tokens, 2.3-2.8 s on the 910B, onto one GPU-B — prfaas's own θ, 84,578; PDD 111.8 -> 147.8). Cuts below
the tail are NOT built: every cut adds two integer columns per P pool, and on the flagship (whose longest
prompts prefill within the SLA, and whose light line is already prfaas's θ) its two highest cuts made the
solve 2.2x slower for a BCR within the gap. A prfaas plan at such a θ can lie outside PDD's (compare's hint
says so); the tail cuts too stay within ``p_tiers.SET_COLUMNS_MAX`` set-queue columns (a plan note says so).
"""

from __future__ import annotations

import dataclasses

from placer.pdd import LIGHT, MIX, P
from placer.problem import Problem

#: How far the P split goes in one build (``placer.ilp.p_tiers.split_mode`` picks it by model size): none;
#: the heavy/light split at each chip's light line only; SPLIT_LIGHT + c: and the c highest threshold cuts.
SPLIT_NONE, SPLIT_LIGHT = 0, 1


def uncached_tokens(problem: Problem) -> list[int]:
    """Each class's uncached tokens (1 − h)·I, rounded as plans report them."""
    return [round((1 - c.hit_rate) * c.input_tokens) for c in problem.classes]


def threshold_sets(problem: Problem, cuts: int | None = None) -> list[frozenset[int]]:
    """The admitted sets of the threshold cuts, the highest θ first: for each distinct uncached count θ but
    the lowest, the classes at or above θ and those below (θ at the lowest, or above the longest, admits
    every class: the mix queue's own); ``cuts``: the highest that many cuts only (None: every one)."""
    uncached = uncached_tokens(problem)
    everyone = frozenset(range(len(problem.classes)))
    out: list[frozenset[int]] = []
    for theta in sorted(set(uncached))[1:][::-1][:cuts]:
        above = frozenset(k for k, u in enumerate(uncached) if u >= theta)
        out += [above, everyone - above]
    return out


def tail_cuts(problem: Problem, hopeless: set[int]) -> int:
    """How many of the highest cuts are tail cuts: their classes at or above θ all in ``hopeless`` (late on
    every P instance for their prefill alone, :func:`placer.ilp.p_tiers.split_mode`)."""
    sets = threshold_sets(problem)
    return next((i for i, above in enumerate(sets[::2]) if not above <= hopeless), len(sets) // 2)


def set_queues(problem: Problem, cuts: int, light_split: tuple[frozenset[int], ...],
               tiers: tuple[float, ...]) -> dict[frozenset[int], tuple[float, ...]]:
    """A pool's whole-instance "set" queues: admitted classes → their utilisation tiers, highest first.

    ``light_split``: the heavy/light split's two sets (at the cap) where the pool takes it, else ();
    ``cuts``: the threshold sets of that many of the highest cuts join them (:func:`threshold_sets`) at
    ``tiers`` (the cap first)."""
    cap = problem.options.utilization_cap
    out = {s: (cap,) for s in light_split}
    for s in threshold_sets(problem, cuts) if cuts > 0 else ():
        out[s] = tiers
    return out


def add_whole_sets(m, tier: dict, n: dict) -> None:
    """Whole instances for every "set" queue (``Pool.whole``) of the model ``m``
    (:class:`~placer.ilp.model.LinearModel`): a set's tiers on one physical pool (``tier``: queue → its
    c_{p,t} column; ``n``: pool key → n_p) sum to an integer count — its one tier's column made integer,
    or a new integer column ``whole[…]`` equal to their sum (row family "whole").

    Likewise a P pool's "mix" tiers where the pool also has a "light" queue: the layout
    (:func:`placer.pdd.queue_layout`) lays the light queue after them, so on whole instances the two never
    share one — an instance they shared would be one FCFS line where a rare long prompt of the mix holds up
    the light queue's many short ones, which neither law sees (rnd-7-0: one 85K-token prompt at 0.0004 req/s
    on an H20 tp1 serving 15 req/s of light prompts, a 43-s prefill; TTFT P90 planned 2.42 s, simulated 8.1)."""
    groups: dict[tuple, list] = {}
    light_pools = {q.key for q in tier if q.role == P and q.mix == LIGHT}
    for q, var in tier.items():
        if q.whole or (q.role == P and q.mix == MIX and q.key in light_pools):
            groups.setdefault((q.key, q.mix), []).append((q, var))
    for key, members in groups.items():
        first, columns = members[0][0], [var for _, var in members]
        if len(columns) == 1:
            m.vars[columns[0]] = dataclasses.replace(m.vars[columns[0]], integer=True)
            continue
        count = m.var(f"whole[{first.label}]", 0, m.vars[n[key[0]]].ub, integer=True)  # named by its first tier
        m.add(f"whole[{first.label}]", "whole", {**{var: 1.0 for var in columns}, count: -1.0}, "==", 0.0)
