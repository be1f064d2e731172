"""Each class's own KV wait at a decoder that admits FIFO with EASY backfilling (issue 42).

in:  :func:`placer.kv_wait.kv_wait_law` (the pool's share that waits and their mean wait, its drain rate) and
     :func:`placer.kv_wait.kv_room_beta`'s room; the standard library only (tests/test_layers.py checks it)
out: :func:`class_kv_wait_law` — (share that waits, mean seconds those wait) per row of the load
     ((λ, L, f) per class or footprint point); :func:`named_kv_waits` — the same per class over its points
     (:class:`placer.decode_state.DecodeState`'s ``class_kv_wait``, :func:`placer.decode_sites.class_kv_waits`)

The pool's law gives one share and one wait for every arrival; the admission rule
(:func:`placer.kv_admission.admit_order`) does not treat them alike where footprints differ a lot. While a
line waits, its head H does not fit in the room F left free (F < H); an arrival of footprint f passes the line
when it fits (f ≤ F) and leaves before the head's room comes or fits in what that leaves spare. Three things
follow from the rule, each priced here with the pool's own quantities (nothing fitted):

* **Whether it finds the room.** The room left is below the head's footprint and below that of every follower
  already waiting that could have used it (they are scanned first, in arrival order): F is uniform under
  Z = min(H, the smallest footprint among the N − 1 followers), N the line's members while one waits (Little:
  Σ λ_k s_k w_k ÷ P) drawn from the line's mix (each class by λ s w), the head by those times its footprint
  (a head holds the line until f of room is given back). P(f ≤ F) = E[(1 − f/Z)⁺].
* **Whether it may pass.** It leaves before the head's room comes when its stay is shorter than the head's
  remaining deficit ÷ the drain rate (the deficit uniform under H); otherwise it must fit in the spare,
  the overshoot of the departures (λ-weighted footprints J) past the deficit: P(spare ≥ f) = E[(J − f)⁺] / E[J].
* **How long one that could not pass waits.** It is tried again at each new head (while a line waits, one every
  τ = P ÷ Σ λ_k p_k seconds: the line's joiners are admitted one by one) with the same chance, and is admitted at the latest when the line in front of it has drained (W_L):
  w = 1 / (π / τ + 1 / W_L).

The classes that cannot pass wait the line's W_L. The line's tokens are the pool's (the occupancy above the
capacity: Little on tokens, Σ λ_k P W f_k); who waits in it only decides how they are split, so W_L is
solved from Σ_k λ_k p_k w_k f_k = P W Σ λ_k f_k. A class whose own footprint finds no room more often than
the line forms (β_k from its f_k, :func:`placer.kv_wait.kv_room_beta` with its footprint for the arrival's)
waits that often before it may pass. One class: the pool's law exactly.

The line's mix and who passes depend on each other: the fixed point is taken from above (every class passing,
the line empty of them, then damped rounds), the one a line of big heads settles at — small classes that pass
are never in the line to take the room a newcomer would pass with; where small ones are most of the line
(they cannot leave before a head's room comes: waits shorter than their stays) they take it, and every class
waits alike.

Against the simulator's decoder alone fed a plan's classes (scaled down in tests/placer/test_kv_class_wait.py):
rnd-7-21's MD dc3 B200 tp4 pool (c1 53K over 17.8 s, c9 78K over 0.45 s, c2 22K over 13.4 s, c3 2.3K over 1.8 s;
two seeds of 8,000 s): c1/c9 32-44 % waited 2.0-3.6 s, c2 26-35 % 0.64-0.76 s, c3 5-8 % 0.27-0.28 s; this law
47 / 48 % 4.0 s, 39 % 0.57 s, 8 % 0.12 s (the pool's: every class 46 %, 3.83 s). rnd-7-25's plan's B200 tp4 pool
(1K-32K footprints, the small ones most of its arrivals): every class 14-15 % 0.43-0.49 s simulated, this law
21-24 % 0.72 s (the pool's 21 %, 0.77 s). A waiter of a class that passes waits 0.4-0.65 of the simulator's (its
retries are priced as fresh chances; in the simulator a room too small for it stays small a while).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from placer.kv_wait import kv_drain_rate, kv_room_beta, kv_wait_law, waiting_share

#: Rounds of the fixed point (the line's mix ↔ who passes); it settles in a few.
_ROUNDS = 30


def _tail_mean(values: Sequence[tuple[float, float]], x: float) -> float:
    """E[(J − x)⁺] ÷ E[J] over ``values`` ((weight, size) pairs)."""
    total = sum(w * f for w, f in values)
    return sum(w * max(f - x, 0.0) for w, f in values) / total if total > 0 else 0.0


def _fit_share(f: float, heads: Sequence[tuple[float, float]], line: Sequence[tuple[float, float]],
               followers: float) -> float:
    """P(f ≤ F), F uniform under Z = min(H, the smallest of ``followers`` footprints drawn from ``line``):
    E[(1 − f/Z)⁺] = ∫_f^∞ f/z² P(Z > z) dz, P(Z > z) = P(H > z) × P(a line member > z)^followers."""
    h_tot = sum(w for w, _ in heads)
    l_tot = sum(w for w, _ in line)
    if h_tot <= 0:
        return 0.0
    cuts = sorted({s for _, s in heads} | {s for _, s in line} | {f})
    out = 0.0
    for a, b in zip(cuts, cuts[1:]):
        if b <= f:
            continue
        lo = max(a, f)
        above_h = sum(w for w, s in heads if s > lo) / h_tot  # constant on (lo, b)
        above_l = sum(w for w, s in line if s > lo) / l_tot if l_tot > 0 else 1.0
        out += f * (1.0 / lo - 1.0 / b) * above_h * above_l ** followers
    return out


def class_kv_wait_law(capacity_tokens: float, load: Sequence[tuple[float, float, float]],
                      fixed_share: float = 1.0) -> list[tuple[float, float]]:
    """(share of the row's arrivals that wait for KV room, mean seconds those wait) for each row of ``load``
    ((λ, L, f): arrivals/s, held at once, footprint), at a decoder of ``capacity_tokens`` that admits FIFO
    with EASY backfilling (the module docstring); ``fixed_share``: φ as for :func:`placer.kv_wait.kv_wait_law`."""
    rows = list(load)
    share, wait = kv_wait_law(capacity_tokens, rows, fixed_share)
    if share <= 0 or wait <= 0:
        return [(share, wait) if a > 0 else (0.0, 0.0) for a, _, _ in rows]
    live = [(a, h / a, f) for a, h, f in rows if a > 0]
    drain = kv_drain_rate(capacity_tokens, rows, fixed_share)
    # a class's own room: the line's share, or more where its footprint finds no room more often
    base = []
    for a, h, f in rows:
        if a <= 0:
            base.append(0.0)
            continue
        beta = kv_room_beta(capacity_tokens, rows, fixed_share, arrival_tokens=f)
        base.append(max(share, waiting_share(beta)))
    departures = [(a, f) for a, _, f in live]
    passed = [1.0] * len(rows)  # from every arrival passing down: the line's mix is the classes that cannot
    waits = [wait if a > 0 else 0.0 for a, _, _ in rows]
    line_wait = wait
    for _ in range(_ROUNDS):
        members = [(a * base[i] * max(1.0 - passed[i], 1e-9) * waits[i], f)  # the line's mix: λ p w
                   for i, (a, _, f) in enumerate(rows) if a > 0]
        count = sum(w for w, _ in members)
        heads = [(w * f, f) for w, f in members]
        n_line = count / share if share > 0 else 0.0
        joining = sum(a * base[i] * (1.0 - passed[i]) for i, (a, _, _) in enumerate(rows) if a > 0)
        tau = share / joining if joining > 0 else math.inf  # a new head this often while a line waits
        new_passed = []
        for a, h, f in rows:
            if a <= 0:
                new_passed.append(0.0)
                continue
            stay = h / a
            fits = _fit_share(f, heads, members, max(n_line - 1.0, 0.0))
            head_tot = sum(w for w, _ in heads)
            early = sum(w * max(0.0, 1.0 - drain * stay / s) for w, s in heads) / head_tot if head_tot else 0.0
            new_passed.append(fits * (early + (1.0 - early) * _tail_mean(departures, f)))
        passed = [0.5 * (p + q) for p, q in zip(passed, new_passed)]
        line_wait = _solve_line_wait(rows, base, passed, tau, share * wait * sum(a * f for a, _, f in live))
        waits = [_retry_wait(p, tau, line_wait) for p in passed]
    return [(base[i] * (1.0 - passed[i]), waits[i]) if a > 0 else (0.0, 0.0) for i, (a, _, _) in enumerate(rows)]


def named_kv_waits(capacity_tokens: float, named: Sequence[tuple[str, Sequence[tuple[float, float, float]]]],
                   fixed_share: float = 1.0) -> dict[str, tuple[float, float]]:
    """(share of a class's arrivals that wait for KV room, mean seconds those wait) per class name of ``named``
    ((name, its load rows: its footprint points)), by :func:`class_kv_wait_law` over every row, each class's
    points by their arrivals (a name given twice, e.g. relayed and not, pooled)."""
    rows = [row for _, part in named for row in part]
    law = iter(class_kv_wait_law(capacity_tokens, rows, fixed_share))
    sums: dict[str, list[float]] = {}
    for name, part in named:
        acc = sums.setdefault(name, [0.0, 0.0, 0.0])
        for (a, _, _), (share, wait) in zip(part, law):
            acc[0] += a
            acc[1] += a * share
            acc[2] += a * share * wait
    return {name: (waiting / arriving if arriving > 0 else 0.0, waited / waiting if waiting > 0 else 0.0)
            for name, (arriving, waiting, waited) in sums.items()}


def _retry_wait(passed: float, tau: float, line_wait: float) -> float:
    """Mean wait of one that could not pass: tried again every ``tau`` s with chance ``passed``, admitted by
    ``line_wait`` at the latest (both exponential: the first of two clocks)."""
    rate = (passed / tau if tau > 0 and math.isfinite(tau) else 0.0) + (1.0 / line_wait if line_wait > 0 else 0.0)
    return 1.0 / rate if rate > 0 else 0.0


def _solve_line_wait(rows, base, passed, tau: float, tokens_waited: float) -> float:
    """W_L with Σ_k λ_k p_k w_k(W_L) f_k = ``tokens_waited`` (the pool's line tokens, Little): bisection, the
    left side rising in W_L."""
    def held(line_wait: float) -> float:
        return sum(a * base[i] * (1.0 - passed[i]) * _retry_wait(passed[i], tau, line_wait) * f
                   for i, (a, _, f) in enumerate(rows) if a > 0)
    lo, hi = 0.0, 1.0
    while held(hi) < tokens_waited and hi < 1e9:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if held(mid) < tokens_waited else (lo, mid)
    return hi
