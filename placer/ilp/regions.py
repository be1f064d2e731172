"""A plan of a large problem by regions: connected groups of ~14 sites, each solved whole, the plans joined.

in:  a :class:`~placer.problem.Problem` with many sites and lines, its
     :class:`~placer.ilp.sets.Architecture`, the solve's started :class:`~placer.ilp.config.SolveConfig`, and
     the local model (:mod:`placer.ilp.local_first`) with its LP relaxation's least-cost solution, whose load
     per region apportions the arrival rate
out: :func:`regional_plan`: :class:`RegionalPlan`, a plan of the whole model by variable name with its ratio —
     or None when a region has no plan in its time; :func:`split`: the regions; :func:`worth_it`: whether
     there are enough sites and time for them (:data:`REGION_MIN_S` each: not at 100 × 12 in 300 s).

Why: at 100 sites × 12 classes the local plan reaches BCR ~240 in minutes and the whole model's MILP does
not improve it (its LP bound ~289), while 16 sites × 12 classes, solved whole, reach 285 in a minute: the
Dinkelbach machinery finds good plans on models of a region's size, not on the fleet's.

Why the joined plan is a plan of the whole model: every row of the whole model is one of
* per site or per pool (P capacity and memory, mix queues, decode split, slots and memory, inventory,
  power) or per line (C8): each holds in the one region that owns that site or line, with the same
  coefficients (a region's pools, queues, designs and lines are the whole model's: the P split is the whole
  problem's, :func:`_same_split`); a line between two regions carries nothing, so its row holds;
* per class, over every site: the demand (C1) Σ_f x_f = s_k·G and the SLA row (C11) Σ_f late_f·x_f ≤ 0.1·G:
  each region's problem keeps the class shares s_k, so the sum of the regions' rows is the whole row with
  G = Σ_r G_r; (C2) f_min·arrival ≤ G ≤ arrival holds as the regions' arrival rates sum to the whole's;
* the decode covers (C18): implied by whole instance counts.
Variables not in any region's model (the lines between regions) are 0. ``by_name`` sums values of a name
(only G appears in every region). The caller's :func:`placer.ilp.starts._feasible_start` checks it anyway.

Each region's arrival rate is the load the local model's LP relaxation (its least-cost solution) carries on
its sites (every local flow stays in its site, so it splits exactly by region): where capacity is cheap, the
region gets load. At 100 sites × 12 classes (regions of 15-19 sites) the regions' LP bounds joined are
287.5 req/USD at those loads (the local LP: 287.1), 276.4 at loads in proportion to the sites, and their
MILPs found far less at the loads of the LP rounded (one region 142.8 at 195 req/s: its LP bound 237). The regions run in forked worker processes, as many at once as there
are cores, each within its share of :data:`REGION_SHARE` of the time left. Not a bound: the certified gap
stays the whole model's LP bound's.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections import defaultdict, deque
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace

from placer.errors import PlacerError
from placer.ilp import data as ilp_data
from placer.ilp.config import SolveConfig, building_within
from placer.ilp.dinkelbach import solve_objective
from placer.ilp.formulation import Formulation, build
from placer.ilp.p_tiers import split_mode
from placer.ilp.plan_names import per_flow
from placer.ilp.sets import Architecture
from placer.ilp.starts import _cost, _goodput
from placer.problem import Problem

#: Sites per region: 16 sites × 12 classes (60 k columns) reach 285 req/USD at a 5-10 % certified gap in 60 s.
REGION_SITES = 14
#: Share of the time left that the regions take together (the whole model's build, ~20-55 s at 100 × 12, and
#: its LP bound, ~30 s, need the rest).
REGION_SHARE = 0.45
#: Regions run only where each gets at least this many seconds (in waves of as many as there are cores). Measured
#: at 100 sites × 12 classes on 2 shared cores (load 5-7), regions of 15-19 sites at the local LP's loads: a region
#: of 19 sites found 212.5 req/USD at 45 s and the same at 100 s (its LP bound 278.6), the six joined 221.2 at
#: 45 s each, where the local model's own Dinkelbach reaches ~242 in 120 s: at 300 s they do not run.
REGION_MIN_S = 60.0


@dataclass
class RegionalPlan:
    """The joined plan (``by_name``: the whole model's variables), its ratio and each region's."""

    by_name: dict[str, float]
    ratio: float  # SLA goodput per USD/h
    regions: list[tuple[str, ...]]
    ratios: list[float]
    arrival: list[float]  # req/s each region was given


def worth_it(problem: Problem, config: SolveConfig, workers: int | None = None) -> bool:
    """Whether ``problem`` splits into two or more regions and each gets :data:`REGION_MIN_S` of
    :data:`REGION_SHARE` of the time left, ``workers`` (default: the cores) at once."""
    if not problem.links or len(problem.datacenters) < 2 * REGION_SITES:
        return False
    count = len(split(problem))
    waves = math.ceil(count / max(1, min(workers or os.cpu_count() or 1, count)))
    return count >= 2 and REGION_SHARE * config.left_s() / waves >= REGION_MIN_S


def split(problem: Problem, size: int | None = None) -> list[tuple[str, ...]]:
    """The sites in connected regions of about ``size`` over the line graph: each grown breadth-first from
    the first site left (in the scenario's order), at most ``size`` sites; a region under half of ``size``
    joins the smallest region it has a line to. ``size``: :data:`REGION_SITES` by default."""
    size = size or REGION_SITES
    names = list(problem.dc_names)
    order = {n: i for i, n in enumerate(names)}
    near: dict[str, set[str]] = defaultdict(set)
    for src, dst in problem.links:
        near[src].add(dst)
        near[dst].add(src)
    owner: dict[str, int] = {}
    regions: list[list[str]] = []
    for seed in names:
        if seed in owner:
            continue
        region, queue = [seed], deque([seed])
        owner[seed] = len(regions)
        while queue and len(region) < size:
            for other in sorted(near[queue.popleft()], key=order.get):
                if other not in owner and len(region) < size:
                    owner[other] = len(regions)
                    region.append(other)
                    queue.append(other)
        regions.append(region)
    for i, region in enumerate(regions):
        if not region or len(region) >= size / 2:
            continue
        touching = {owner[o] for s in region for o in near[s]} - {i}
        if touching:
            into = min(touching, key=lambda j: (len(regions[j]), j))
            regions[into].extend(region)
            for s in region:
                owner[s] = into
            region.clear()
    return [tuple(sorted(r, key=order.get)) for r in regions if r]


def region_problem(problem: Problem, sites: tuple[str, ...], arrival_rps: float) -> Problem:
    """``problem`` on ``sites`` only: their datacenters, the lines between two of them, ``arrival_rps``
    (the class shares and everything else unchanged)."""
    inside = set(sites)
    return replace(problem, datacenters=tuple(d for d in problem.datacenters if d.name in inside),
                   links={k: v for k, v in problem.links.items() if k[0] in inside and k[1] in inside},
                   line_capacity={k: v for k, v in problem.line_capacity.items() if k[0] in inside and k[1] in inside},
                   arrival_rps=arrival_rps)


def region_loads(form: Formulation, values: list[float], regions: list[tuple[str, ...]]) -> list[float]:
    """The arrival rate each region gets: the load ``values`` (a solution of the local model, its LP
    relaxation's least-cost one: every flow in its site) carries on its sites, scaled so that they sum to
    the whole arrival rate (by sites where it carries none)."""
    where = {site: i for i, sites in enumerate(regions) for site in sites}
    load = [0.0] * len(regions)
    for flow, rate in form.rates(values).items():
        load[where[flow.p.dc]] += rate
    total = sum(load)
    arrival = form.problem.arrival_rps
    return [arrival * x / total for x in load] if total > 0 else [arrival * len(r) / len(where) for r in regions]


@contextmanager
def _same_split(mode: int):
    """Within this block, :func:`placer.ilp.data.prepare` splits P queues as ``mode`` (the whole problem's),
    not by the region's own size (:func:`placer.ilp.p_tiers.split_mode` drops the split past a pool count):
    the region's queues are then the whole model's, name for name."""
    chosen = ilp_data.split_mode
    ilp_data.split_mode = lambda problem, tiers, notes: mode
    try:
        yield
    finally:
        ilp_data.split_mode = chosen


@dataclass
class _Job:
    """What the forked workers read (set before the pool forks them; nothing else is pickled)."""

    problem: Problem
    arch: Architecture
    backend: str
    mode: int
    regions: list[tuple[str, ...]]
    arrival: list[float]
    seconds: float  # each region's time
    deadline: float  # time.monotonic(): the regions' share ends


_JOB: _Job | None = None


def _solve_region(index: int) -> tuple[dict[str, float], float, float] | None:
    """Region ``index`` of :data:`_JOB` solved whole by Dinkelbach: its plan's non-zero values by name (counts
    rounded), goodput and cost; None without a plan in its time."""
    job = _JOB
    sub = region_problem(job.problem, job.regions[index], job.arrival[index])
    seconds = min(job.seconds, job.deadline - time.monotonic())
    if seconds <= 1.0:
        return None
    config = SolveConfig(backend=job.backend, time_limit_s=seconds, marginals=False).started()
    try:
        with _same_split(job.mode), building_within(config):
            form = build(sub, job.arch, "bcr")
        out = solve_objective(form, config)
    except PlacerError:
        return None
    values = [float(round(x)) if v.integer else x for v, x in zip(form.model.vars, out.values)]
    return per_flow(form, values), _goodput(form, values), _cost(form, values)


def regional_plan(problem: Problem, arch: Architecture, config: SolveConfig, local: Formulation,
                  local_values: list[float], workers: int | None = None) -> RegionalPlan | None:
    """The regions of ``problem`` (:func:`split`) solved whole, each at the load ``local_values`` (the local
    model ``local``'s LP relaxation's least-cost solution) carries there, within :data:`REGION_SHARE` of what is left of ``config``, in
    ``workers`` processes at once (default: the cores); their plans joined. None when a region ends without a
    plan (its load does not fit its whole instances, or its time ran out)."""
    global _JOB
    regions = split(problem)
    arrival = region_loads(local, local_values, regions)
    workers = max(1, min(workers or os.cpu_count() or 1, len(regions)))
    share = REGION_SHARE * config.left_s()
    waves = math.ceil(len(regions) / workers)
    mode = split_mode(problem, {}, [])
    _JOB = _Job(problem, arch, config.backend, mode, regions, arrival, share / waves, time.monotonic() + share)
    try:
        if workers == 1:
            results = [_solve_region(i) for i in range(len(regions))]
        else:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                results = list(pool.map(_solve_region, range(len(regions))))
    finally:
        _JOB = None
    if any(r is None for r in results):
        return None
    joined: dict[str, float] = defaultdict(float)
    for by_name, _, _ in results:
        for name, value in by_name.items():
            joined[name] += value
    good, cost = sum(r[1] for r in results), sum(r[2] for r in results)
    if cost <= 0:
        return None
    return RegionalPlan(dict(joined), good / cost, regions, [r[1] / r[2] if r[2] else 0.0 for r in results], arrival)
