"""A site's decoders (role, datacenter) as a flow meets them: the TPOT and KV-wait figures of the pools a
class is routed to (split from :mod:`placer.decode_state`, which re-exports these).

in:  the decode pools of a plan's analysis (:class:`placer.decode_state.DecodeState` per pool key)
out: :func:`site_tpot_late` (a class's share of requests over the TPOT SLA at a site), :func:`_meets_tpot`,
     :func:`class_kv_waits` (each class's KV wait at each site, over the pools it is routed to)

A site's pools wait for KV differently (one full, one with room to spare), and a plan routes each class to some
of them only; a flow's first token waits as the pools its class goes to make it wait, not as the site's mix.
rnd-7-25-mixed's MD dc1: its B200 tp4 pool (c0, c1, c5, c6) has 21 % of its arrivals waiting 0.77 s for KV,
its two B200 tp8-dep (c1, c2, c3, c4, c6) none; over the site, 8 % of every class's requests waited 0.77 s,
so c2 and c3, which never reach the tp4 pool, were priced 17.7 % and 22.7 % over the simulator's P90.
Within a pool each class waits its own (``DecodeState.class_kv_wait``, :mod:`placer.kv_class_wait`: at a
decoder that backfills, small short requests pass a line of big ones).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from placer.plan import PoolKey

if TYPE_CHECKING:
    from placer.decode_state import DecodeState
    from placer.problem import Class, Problem


def site_tpot_late(decode: dict[PoolKey, DecodeState], site: tuple[str, str], c: Class, tpot_s: float) -> float:
    """The share of a site's (role, datacenter) requests of class ``c`` whose own TPOT exceeds ``tpot_s``
    (:meth:`DecodeState.tpot_late_share`), over its busy pools by the class's requests each takes."""
    rows = [(st.count * sum(r for r, k, _ in st.kv_items if k.name == c.name), st) for key, st in decode.items()
            if (key.role, key.datacenter) == site and st.busy]
    total = sum(w for w, _ in rows)
    return sum(w * st.tpot_late_share(c.output_tokens, tpot_s) for w, st in rows if w > 0) / total if total else 0.0


def _meets_tpot(problem: Problem, decode: dict[PoolKey, DecodeState], role: str, dc: str) -> bool:
    """Whether every busy ``role`` pool in ``dc`` steps within the TPOT SLA."""
    return all(s.step_s <= problem.tpot_s * 1.0001 for k, s in decode.items()
               if k.role == role and k.datacenter == dc and s.busy)


def class_kv_waits(decode: dict[PoolKey, DecodeState]) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(share of a class's arrivals that wait for KV room, mean seconds those wait) per (role, datacenter,
    class), over the pools of the site the class is routed to, by its requests on each (the module
    docstring): a flow's first token waits with (role, datacenter, its class)'s. Each class waits at a pool as its
    own (``class_kv_wait``; the pool's where it has none); an overloaded pool has no steady state to wait in (its
    flows miss the TPOT SLA: :func:`_meets_tpot`) and is left out."""
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for k, st in decode.items():
        if not st.busy or st.overloaded:
            continue
        for rate, c, _ in st.kv_items:
            w = st.count * rate
            share, wait_s = st.class_kv_wait.get(c.name, (st.kv_wait, st.kv_wait_s))
            row = sums[k.role, k.datacenter, c.name]
            row[0] += w
            row[1] += w * share
            row[2] += w * share * wait_s
    return {site: (waiting / arriving, waited / waiting) for site, (arriving, waiting, waited) in sums.items()
            if waiting > 0}
