"""Routing: which pipeline, pools and line a request takes, from the plan.

in:  the Problem, the Plan (routes + per-pool ``assignments``), the simulator's pools
out: per class, a table of *paths* — (pipeline, P pool, RLD pool, decode pool, WAN
     line, route index) — with the probability the plan gives each; a classifier that
     maps an observed (input, output, hit) to the nearest class.

A request's class is decided at arrival from its hit rate (for PDD the hit that
matters is what the decode side already holds: with the DRC on, that decides how much
KV must cross). The path is then drawn in proportion to the plan's rates: the P pool
and pipeline from the class's P assignments, the RLD and MD pools from the class's
assignments in those datacenters (or, for hand-written plans without assignments,
evenly over the pools of the right role there).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass

from placer.p_queues import queue_layout
from placer.pdd import AGG, D, MD, P, P_A, P_D, P_MD, P_RLD, P_RLD_MD, PREFILL_ROLES, RLD

PIPE_CODE = {P_MD: 0, P_RLD_MD: 1, P_RLD: 2, P_D: 3, P_A: 4}


@dataclass(frozen=True)
class RouteKey:
    pipeline: str
    src: str
    dst: str

    @property
    def label(self) -> str:
        return f"{self.pipeline} {self.src}->{self.dst}"


class Path:
    """One way through the system; shared by every request that takes it."""

    __slots__ = ("pipe", "p_pool", "r_pool", "d_pool", "link", "route", "drc", "src", "dst", "p_insts", "p_cum")

    def __init__(self, pipe, p_pool, r_pool, d_pool, link, route, drc, src, dst, p_insts, p_cum):
        self.pipe, self.p_pool, self.r_pool, self.d_pool = pipe, p_pool, r_pool, d_pool
        self.link, self.route, self.drc, self.src, self.dst = link, route, drc, src, dst
        self.p_insts, self.p_cum = p_insts, p_cum  # the P queue's instances and cumulative weights


class Router:
    def __init__(self, problem, plan, pools: dict, links: dict, drc_on: bool):
        self.classes = problem.classes
        self.index = {c.name: k for k, c in enumerate(problem.classes)}
        self.routes: list[RouteKey] = []
        self._route_idx: dict[RouteKey, int] = {}
        by_role_dc: dict[tuple[str, str], list] = defaultdict(list)
        for key, pool in pools.items():
            by_role_dc[(key[0], key[1])].append(pool)
        #: every decode instance of a role in a datacenter (cache-aware choice looks at all of them)
        self.decoders = {rd: [i for pool in ps for i in pool.instances] for rd, ps in by_role_dc.items()
                         if rd[0] != P}
        p_rows = [a for a in plan.assignments
                  if a.role in PREFILL_ROLES and a.rps > 0 and a.request_class in self.index]
        #: where prompts are prefilled: P pools, and the prefill halves of A pools
        prefillers = {k: (pool.prefill if k[0] == AGG else pool) for k, pool in pools.items()}
        slots = queue_slots(p_rows, prefillers)
        if not p_rows:  # a hand-written plan: split each route evenly over the P pools of its source
            p_rows = _rows_from_routes(plan, by_role_dc)
        dec_rows = [a for a in plan.assignments if a.role not in PREFILL_ROLES and a.rps > 0]
        self.paths: list[list[Path]] = [[] for _ in self.classes]
        self.cum: list[list[float]] = [[] for _ in self.classes]
        self.class_rps = [0.0] * len(self.classes)
        decoders = _Decoders(dec_rows, pools, by_role_dc)
        for a in p_rows:
            self._add_paths(a, prefillers, links, slots, decoders, drc_on, pools)
        for k, ws in enumerate(self.cum):
            total = sum(ws)
            cum = [x / total for x in _accumulate(ws)] if total > 0 else []
            if cum:
                cum[-1] = math.inf  # rounding never falls off the end
            self.cum[k] = cum
        self.served = [bool(p) for p in self.paths]
        self._hits = [c.hit_rate for c in self.classes]
        self._log_in = [math.log(c.input_tokens) for c in self.classes]
        self._log_out = [math.log(c.output_tokens) for c in self.classes]
        self._filterable = [c.filterable for c in self.classes]

    def _route_of(self, pipe: str, src: str, dst: str) -> int:
        """The index of route (pipe, src, dst), numbered in order of first use."""
        rk = RouteKey(pipe, src, dst)
        if rk not in self._route_idx:
            self._route_idx[rk] = len(self.routes)
            self.routes.append(rk)
        return self._route_idx[rk]

    def _add_paths(self, a, pools: dict, links: dict, slots: dict, decoders: _Decoders, drc_on: bool,
                   whole: dict) -> None:
        """The paths of one P (or A) assignment: one per (RLD pool, decode pool) it may use, weighted by
        the plan (``pools``: the prefilling pools; ``whole``: every pool, an A path decodes on its own)."""
        k = self.index.get(a.request_class)
        pool = pools.get(a.key)
        if k is None or pool is None:
            return
        pipe, src, dst = a.pipeline or P_MD, a.datacenter, a.dst or a.datacenter
        link = links.get((src, dst)) if src != dst and pipe != P_RLD else None
        rlds = decoders.weights(RLD, src, a.request_class, pipe, dst) if pipe in (P_RLD_MD, P_RLD) else [(None, 1.0)]
        if pipe == P_RLD:
            decs = [(None, 1.0)]
        elif pipe == P_A:
            decs = [(whole[pool.key], 1.0)]
        else:
            decs = decoders.weights(D if pipe == P_D else MD, dst, a.request_class, None, None)
        if not rlds or not decs:
            return
        ridx = self._route_of(pipe, src, dst)
        insts, cum = slots.get((pool.key, getattr(a, "queue", None) or ""), (pool.instances, None))
        for rpool, rw in rlds:
            for dpool, dw in decs:
                self.paths[k].append(Path(PIPE_CODE[pipe], pool, rpool, dpool, link, ridx,
                                          drc_on and pipe != P_D, src, dst, insts, cum))
                self.cum[k].append(a.rps * rw * dw)
        self.class_rps[k] += a.rps

    @property
    def total_rps(self) -> float:
        return sum(self.class_rps)

    def pick(self, k: int, u: float) -> Path:
        """The path of a class-k request for a uniform draw ``u``."""
        cum = self.cum[k]
        return self.paths[k][bisect.bisect_right(cum, u)]

    def classify(self, n_in: int, n_out: int, hit: float, served_only: bool = True) -> int:
        """The class nearest to an observed request (hit rate first, then lengths); -1 if none."""
        best, best_d = -1, math.inf
        li, lo = math.log(max(n_in, 1)), math.log(max(n_out, 1))
        for k, h in enumerate(self._hits):
            if served_only and not self.served[k]:
                continue
            d = abs(h - hit) + 0.25 * abs(self._log_in[k] - li) + 0.1 * abs(self._log_out[k] - lo)
            if d < best_d:
                best, best_d = k, d
        return best


def queue_slots(p_rows: list, pools: dict) -> dict:
    """Instances of each P queue and their weights: ``{(pool key, queue): (instances, cumulative)}``.

    The plan splits a P pool's instances over its queues (``queue_instances``, possibly
    fractional), laid out by :func:`placer.p_queues.queue_layout` (end to end in name order; a
    request of a queue picks one of its instances in proportion to the share the queue has of
    it). Without queue figures, a pool is one queue over all its instances.
    """
    wanted: dict[tuple, dict[str, float]] = defaultdict(dict)
    for a in p_rows:
        q = getattr(a, "queue", None)
        n = getattr(a, "queue_instances", None)
        key = a.key
        if q is not None and n is not None and key in pools:
            wanted[key][q] = n
    out = {}
    for key, queues in wanted.items():
        pool = pools[key]
        for q, parts in queue_layout(queues, pool.count).items():  # the rule the evaluation uses too
            insts = [pool.instances[i] for i, _ in parts]
            cum = _accumulate([w for _, w in parts])
            cum[-1] = math.inf
            out[(key, q)] = (insts, cum if len(insts) > 1 else None)
    return out


def _rows_from_routes(plan, by_role_dc: dict) -> list:
    """P rows for a plan without assignments: each route split over its source's P pools by size."""
    rows = []
    for r in plan.routes:
        cands = by_role_dc.get((P, r.src), [])
        for pool in cands:
            rows.append(_Row(r.request_class, r.pipeline, P, r.src, pool.key, r.dst,
                             r.rps * pool.count / sum(c.count for c in cands)))
    return rows


@dataclass(frozen=True)
class _Decoders:
    """The plan's decode assignments, to weigh the decode pools a request of a class may take."""

    rows: list
    pools: dict
    by_role_dc: dict

    def weights(self, role: str, dc: str, cls: str, pipe: str | None, dst: str | None) -> list[tuple]:
        """(pool, probability) of ``role`` pools in ``dc`` for class ``cls``: by the plan's rates,
        or by pool size when the plan names none."""
        rows = [a for a in self.rows if a.role == role and a.datacenter == dc and a.request_class == cls
                and (pipe is None or a.pipeline in (pipe, None))
                and (dst is None or a.dst in (dst, None))]
        out = [(self.pools[a.key], a.rps) for a in rows if a.key in self.pools]
        if not out:
            out = [(pool, float(pool.count)) for pool in self.by_role_dc.get((role, dc), [])]
        total = sum(w for _, w in out)
        return [(pool, w / total) for pool, w in out] if total > 0 else []


class _Row:
    """A P assignment derived from a route (plans without assignments)."""

    __slots__ = ("request_class", "pipeline", "role", "datacenter", "key", "dst", "rps")

    def __init__(self, request_class, pipeline, role, datacenter, key, dst, rps):
        self.request_class, self.pipeline, self.role = request_class, pipeline, role
        self.datacenter, self.key, self.dst, self.rps = datacenter, key, dst, rps


def _accumulate(ws: list[float]) -> list[float]:
    acc, out = 0.0, []
    for w in ws:
        acc += w
        out.append(acc)
    return out
