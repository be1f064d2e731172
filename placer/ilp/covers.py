"""Decode cover rows: the decoders' whole instances as a knapsack, and its mixed-integer roundings (issue 47).

in:  the model after (C5)-(C7) (:func:`placer.ilp.decode_rows.add_decode`: the z variables and each decode
     pool's slot, step and memory rows), the prepared flows, the pools' counts n and G
out: :func:`decode_covers`: (C18) — rows every plan keeps, which the LP relaxation's
     fractional decoders do not; :func:`take_covers` puts them, kept aside by the build, into its model

Why: the MILP's proof is the gap between its LP relaxation and its whole instances. On sixteen-dc the
relaxation decodes the load on 1.73 tp32 instances spread over four datacenters; a plan needs whole ones
(one tp32 and two tp16), which the branch and bound proves node by node. The rows here state that
rounding once, at the root, for every decode shape: on sixteen-dc's proving MILP (λ = 997.05 req/USD) the
LP relaxation's max goodput − λ·cost drops from 7.07 to 4.18 req/s (the MILP's: 0; the round must prove
0.955); the command's CPU 24.0 -> 19.3 s, eight-dc 4.8 -> 4.5 s, the same plans (bench/compare_planner.py).
The same rows on the P side (each P pool's (C3) over its queues, every request prefilled once) cut nothing
more on sixteen-dc (7.07 -> 7.05) for 948 rows, and its proof ran longer: not added.

(C18) For a reference decode pool ρ (one MD pool per chip and tp), weigh a request of class k by
ω_k = its share of one ρ instance on ρ's slot row. Every decode row of pool q reads
Σ_v a_v z_v ≤ n_q (divided by its right-hand coefficient), so on that row
Σ_v ω_{k(v)} z_v ≤ R_q n_q with R_q = max_v ω_{k(v)} / a_v, taken over every z of q that decodes a
request whole (MD, D, and RLD's filtered P-RLD requests; a row missing one of them gives none), the
least over q's rows. Every served request of class k is decoded whole on exactly one such z
((C5): each pipeline's split sums to its flows; (C1): the flows to s_k·G), so summing over the pools

    Σ_q R_q n_q ≥ Σ_k ω_k s_k · G ≥ Σ_k ω_k s_k · G_min =: D          (the cover)

holds for every plan. The n_q are whole, so the mixed-integer rounding of the cover scaled by 1/δ
holds too, for any δ > 0 (Nemhauser-Wolsey: for Σ a_j n_j ≤ b over integers n ≥ 0 with f_0 = b − ⌊b⌋ > 0,
Σ (⌊a_j⌋ + max(0, f_j − f_0)/(1 − f_0)) n_j ≤ ⌊b⌋, applied to −R/δ, −D/δ); δ runs over the pools'
R_q from COVER_SHARE of the largest up — at such δ a pool's whole instance counts for what it decodes,
and a fraction of one for the smaller shapes. A class that some flow carries to no decoder (an
aggregated A queue) gets ω_k = 0: the cover then says nothing about it.
"""

from __future__ import annotations

import math
from collections import defaultdict

from placer.ilp.data import Prepared
from placer.ilp.model import LinearModel, Row
from placer.pdd import D, MD, P_D, P_MD, P_RLD, P_RLD_MD, RLD

#: δ of the roundings: the pools' R_q from this share of the largest R_q up (smaller δ weigh the large
#: shapes' instances above what they decode, and cut nothing on sixteen-dc)
COVER_SHARE = 0.3
DECODE_ROWS = ("decode_slots", "decode_memory")
#: Models with this many pool counts or more get no covers: 100 sites × 12 classes (2 858 counts) took 3.5 s
#: more to build with them (27.0 -> 30.6 s, 193 k more non-zeros), and its proof is not where its time goes
#: (the first plan is, :data:`placer.ilp.starts.ROUND_FIRST_INTEGERS`); 16 × 12 (295): 60 s gap 14.9 -> 13.5 %
MAX_COUNTS = 1000
#: the rows' family: a caller that lowers G's bound below the build's drops them (placer.ilp.diagnose)
COVER_FAMILY = "decode_cover"
#: the decoder a flow's pipeline decodes a request whole on, and where: its destination or its P datacenter
_WHOLE = {P_MD: (MD, "dst"), P_RLD_MD: (MD, "dst"), P_D: (D, "dst"), P_RLD: (RLD, "src")}


def decode_covers(m: LinearModel, data: Prepared, z: dict[tuple, int], n: dict, g: int,
                  shares: list[float]) -> list[Row]:
    """(C18): the cover and its roundings for every reference shape, as rows not yet in ``m`` (none from
    :data:`MAX_COUNTS` pool counts up)."""
    if len(n) >= MAX_COUNTS:
        return []
    pools = _pool_rows(m, z, n)
    refs: dict[tuple, tuple] = {}
    for q in data.decode:
        if q.role == MD and q.key in pools and pools[q.key][1]:
            refs.setdefault((q.chip, q.tp), q.key)
    return _covers(pools, refs, _covered_classes(data, len(shares)), n, m.vars[g].lb, shares, COVER_FAMILY)


def _covers(pools: dict, refs: dict, covered: set[int], n: dict, g_min: float, shares: list[float],
            family: str) -> list[Row]:
    """The cover of each reference pool's weights over ``pools`` (key → its whole-work vars by class and its rows
    Σ a_v x_v ≤ n_q), and its roundings."""
    added: list[Row] = []
    for shape, ref in refs.items():
        omega = _weights(pools[ref], covered)
        demand = g_min * sum(omega.get(k, 0.0) * s for k, s in enumerate(shares))
        reach = {key: r for key, (classes, rows) in pools.items() if (r := _reach(classes, rows, omega)) > 0}
        if demand <= 0 or not reach or math.inf in reach.values():  # a pool no row bounds: no cover
            continue
        cover = {n[key]: r for key, r in reach.items()}
        label = f"{shape[0]},tp{shape[1]}"
        added.append(Row(f"{family}[{label}]", family, cover, ">=", demand))
        top = max(cover.values())
        for j, delta in enumerate(sorted({r for r in cover.values() if r >= COVER_SHARE * top})):
            row = _rounded(cover, demand, delta)
            if row is not None:  # named by its place: two δ may print alike
                coeffs = {i: c for i, c in row[0].items() if c != 0.0}
                added.append(Row(f"{family}[{label},mir{j}]", family, coeffs, ">=", float(row[1])))
    return added


def _pool_rows(m: LinearModel, z: dict[tuple, int], n: dict) -> dict[tuple, tuple[dict[int, int], list[dict]]]:
    """Per decode pool key: its whole-decode z variables (var → class) and its rows Σ a_v z_v ≤ n_q as {var: a_v}."""
    whole: dict[tuple, dict[int, int]] = defaultdict(dict)
    for (k, pipe, _, q), var in z.items():
        if pipe != P_RLD_MD:  # a relay's RLD tokens: the request is decoded whole on MD after it
            whole[q.key][var] = k
    by_var = {var: key for key, var in n.items()}
    rows: dict[tuple, list[dict]] = defaultdict(list)
    for row in m.rows:
        if row.family not in DECODE_ROWS or row.sense != "<=" or row.rhs != 0.0:
            continue
        counts = [i for i in row.coeffs if i in by_var]
        if len(counts) != 1 or row.coeffs[counts[0]] >= 0:
            continue
        cap = -row.coeffs[counts[0]]
        if any(c < 0 for i, c in row.coeffs.items() if i != counts[0]):
            continue
        rows[by_var[counts[0]]].append({i: c / cap for i, c in row.coeffs.items() if i != counts[0]})
    return {key: (whole.get(key, {}), rows.get(key, [])) for key in {*rows, *whole}}


def _covered_classes(data: Prepared, classes: int) -> set[int]:
    """Classes every flow of which is decoded whole on an MD, D or RLD pool where its split has one."""
    decoders = {(q.role, q.dc) for q in data.decode}
    out = set(range(classes))
    for f in data.flows:
        role, at = _WHOLE.get(f.pipeline, (None, None))
        if role is None or (role, f.dst if at == "dst" else f.src) not in decoders:
            out.discard(f.k)
    return out


def _weights(pool: tuple[dict[int, int], list[dict]], covered: set[int]) -> dict[int, float]:
    """ω_k: a class-k request's share of one reference instance on its first (slot) row; 0 for classes not covered."""
    classes, rows = pool
    omega: dict[int, float] = {}
    for var, k in classes.items():
        if k in covered:
            omega[k] = max(omega.get(k, 0.0), rows[0].get(var, 0.0))
    return omega


def _reach(classes: dict[int, int], rows: list[dict], omega: dict[int, float]) -> float:
    """R_q: the most ω-weighted requests one instance of the pool decodes whole, by its tightest row (0: it
    decodes none of them; inf: no row bounds them all)."""
    weighed = {var: omega.get(k, 0.0) for var, k in classes.items()}
    if not any(w > 0 for w in weighed.values()):
        return 0.0
    best = math.inf
    for row in rows:
        if all(row.get(var, 0.0) > 0 for var, w in weighed.items() if w > 0):
            best = min(best, max(w / row[var] for var, w in weighed.items() if w > 0))
    return best


def _rounded(cover: dict[int, float], demand: float, delta: float) -> tuple[dict[int, float], float] | None:
    """The mixed-integer rounding of Σ cover_j n_j ≥ demand scaled by 1/δ, as a ≥ row (None when it adds nothing)."""
    b = -demand / delta
    f0 = b - math.floor(b)
    if f0 < 1e-6 or f0 > 1 - 1e-6:
        return None
    coeffs = {}
    for var, r in cover.items():
        a = -r / delta
        fj = a - math.floor(a)
        coeffs[var] = -(math.floor(a) + max(0.0, fj - f0) / (1 - f0))
    return coeffs, -math.floor(b)


def take_covers(form) -> None:
    """Put (C18), which :func:`placer.ilp.formulation.build` keeps aside (``form.covers``), into ``form.model``.

    Kept aside until Dinkelbach's rounds on the whole model (:mod:`placer.ilp.dinkelbach`): in the LP relaxation
    whose least-cost plan marks the restricted seed's sites they move its cheapest pools (sixteen-dc: a seed
    at 944 req/USD against 997, a longer proof after it); in the proving rounds they cut the root's bound."""
    if form.covers:
        form.model.rows.extend(form.covers)
        form.covers = []
