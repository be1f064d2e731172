"""The P queues of one P pool: their utilisation tiers and admitted classes.

in:  a :class:`~placer.problem.Problem` and one P instance (:class:`~placer.perfmodel.InstanceModel`)
out: :func:`p_tiers` (a pool's "mix" tiers, whether a "light" queue joins them, its heavy classes),
     :func:`p_queues` (its queues as :class:`~placer.ilp.sets.Pool` candidates: "mix" tiers, a "light"
     queue or the "heavy" and light-set "set" queues, and the threshold cuts' "set" queues
     (:mod:`placer.ilp.p_cuts`), set queues on whole instances), :func:`chip_p_queues` (a chip's shapes in
     a datacenter), :func:`split_mode` (how far the split goes within the model-size limits),
     :func:`tier_utilizations`, :func:`heavy_classes`, :func:`heavy_on_time` — read by
     :mod:`placer.ilp.data` (which re-exports them).
"""

from __future__ import annotations

from dataclasses import replace

from placer.flows import instance, ttft_det_s
from placer.ilp.config import checked
from placer.ilp.p_cuts import SPLIT_LIGHT, SPLIT_NONE, set_queues, tail_cuts
from placer.ilp.sets import Pool, set_queue_name
from placer.ilp.shape_pools import candidate_shapes
from placer.p_queues import light_classes, queue_wait_law, set_wait_law
from placer.pdd import LIGHT, MIX, P
from placer.perfmodel import InstanceModel
from placer.problem import Problem
from placer.queueing import WaitModel


#: P queues are planned at the utilisations where their share of late requests (above the
#: share that is late even at zero load) reaches these levels, plus the cap: a tier where
#: lateness changes little is not worth a variable, and a pool whose prefill is close to
#: the TTFT SLA gets tiers down to whatever light load its tail needs (see
#: :func:`tier_utilizations`).
LATENESS_LEVELS = (0.02, 0.06, 0.15)
#: ... and at these fractions of the cap: flows slower than a class's fastest (a WAN
#: transfer before the first token) have less slack, so the grid placed by the fastest
#: flows alone would be too coarse for them.
GEOMETRIC_TIERS = (1.0, 0.7, 0.45)
#: Tiers closer than this (relative) collapse into one.
_TIER_MERGE = 0.08


def _lateness(problem: Problem, law: WaitModel, rho: float, fastest_s: list[float], admitted: list[int]) -> float:
    """Share of the queue's admitted traffic late at utilisation ``rho`` (service moments of
    ``law``), each class on its fastest pipeline."""
    at = replace(law, rho=rho)
    total = sum(problem.classes[k].share for k in admitted)
    return sum(problem.classes[k].share * at.prob_exceeds(problem.ttft_p90_s - fastest_s[k])
               for k in admitted) / total


def p_wait_law(problem: Problem, im: InstanceModel, rho: float, mix: str,
                admits: frozenset[int] | None = None) -> WaitModel:
    """A P queue's M/G/1 law: a "set" queue's (``admits``) over its classes, else the mix's or light's."""
    return set_wait_law(problem, im, rho, admits) if admits else queue_wait_law(problem, im, rho, mix)


def tier_utilizations(problem: Problem, im: InstanceModel, mix: str, fastest_s: list[float],
                      admitted: list[int], admits: frozenset[int] | None = None) -> list[float]:
    """The utilisation tiers of one P queue, highest first: :data:`GEOMETRIC_TIERS` of the cap,
    and below the lowest of those, for each level L of :data:`LATENESS_LEVELS`, the
    utilisation ρ_L at which the queue's lateness (its admitted classes in proportion, each at its fastest TTFT without
    queueing, ``fastest_s``) is L above its zero-load floor — found by bisection (lateness
    grows with ρ under the M/G/1 law); tiers within 8 % of a higher one merge into it. The
    MILP mixes tiers (C0), so a pool may run at any utilisation between two of them; every
    flow is priced exactly at each tier (late[f]). ``admits``: a "set" queue's classes (its law)."""
    cap = problem.options.utilization_cap
    law = p_wait_law(problem, im, cap, mix, admits)
    floor = _lateness(problem, law, 0.0, fastest_s, admitted)
    top = _lateness(problem, law, cap, fastest_s, admitted)
    candidates = [cap * share for share in GEOMETRIC_TIERS]
    for level in LATENESS_LEVELS:
        target = floor + level
        if target >= top:
            continue
        lo, hi = 0.0, cap
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _lateness(problem, law, mid, fastest_s, admitted) < target else (lo, mid)
        if 1e-4 < lo < cap * GEOMETRIC_TIERS[-1]:  # above it, the fixed tiers' chords serve
            candidates.append(lo)
    tiers = [cap]
    for rho in sorted(candidates, reverse=True):
        if rho < tiers[-1] * (1 - _TIER_MERGE):
            tiers.append(round(rho, 4))
    return tiers


def _fastest_s(problem: Problem, im: InstanceModel) -> list[float]:
    """Each class's fastest TTFT without queueing from a P instance ``im``: prefill + the whole
    prompt's KV by RDMA (to RLD, or a local MD) — the grid's reference; WAN flows are slower."""
    return [ttft_det_s(im.prefill_s(c.input_tokens, c.hit_rate), im.rdma_s(c.input_tokens * problem.kv_bytes_per_token))
            for c in problem.classes]


def heavy_classes(problem: Problem, im: InstanceModel) -> frozenset[int]:
    """The classes a "heavy" P queue on ``im`` admits: those not light there
    (:func:`placer.p_queues.light_classes`) — empty where none or all are light."""
    light = set(light_classes(problem, im))
    heavy = frozenset(k for k in range(len(problem.classes)) if k not in light)
    return heavy if light and heavy else frozenset()


def p_tiers(problem: Problem, im: InstanceModel,
             admits: frozenset[int] | None = None) -> tuple[list[float], bool, frozenset[int]]:
    """The P queues of one instance (chip, shape), the same in every datacenter: the "mix" queue's
    utilisation tiers; whether a "light" one at the cap joins them — when some classes, but
    not all, are light (short services wait little even there; a light tier grid grew the model
    without changing the plans); and then the pool's heavy classes (:func:`heavy_classes`), for
    its "heavy" queue and the light classes' "set" queue beside it. A "set" queue's (``admits``)
    tiers come from its classes, no light or heavy one."""
    if admits:
        return tier_utilizations(problem, im, MIX, _fastest_s(problem, im), sorted(admits), admits), False, frozenset()
    tiers = tier_utilizations(problem, im, MIX, _fastest_s(problem, im), list(range(len(problem.classes))))
    heavy = heavy_classes(problem, im)
    return tiers, bool(heavy), heavy


def heavy_on_time(problem: Problem, im: InstanceModel, heavy: frozenset[int]) -> bool:
    """Whether a heavy queue on ``im`` can serve any of its classes within the TTFT SLA: its share
    late at the cap (each class at its fastest TTFT, :func:`tier_utilizations`' reference) is below
    1 — else the queue would only carry late requests, which the mix queues carry as well."""
    cap = problem.options.utilization_cap
    return _lateness(problem, set_wait_law(problem, im, cap, heavy), cap, _fastest_s(problem, im), sorted(heavy)) < 1.0


def _pool_sets(problem: Problem, im: InstanceModel, found: tuple, mode: int) -> tuple[dict, bool]:
    """A pool's whole-instance "set" queues in split ``mode`` (:func:`placer.ilp.p_cuts.set_queues`: set →
    tiers), and whether the heavy/light split at the light line takes the light queue's place there."""
    _, light_queue, heavy = found
    taken = bool(light_queue and mode >= SPLIT_LIGHT and heavy_on_time(problem, im, heavy))
    light_split = (heavy, frozenset(range(len(problem.classes))) - heavy) if taken else ()
    cap = problem.options.utilization_cap  # a set's tiers: the fixed ones of every tier grid (tier_utilizations)
    tiers = tuple(round(cap * g, 4) for g in GEOMETRIC_TIERS)
    return set_queues(problem, mode - SPLIT_LIGHT, light_split, tiers), taken


def p_queues(problem: Problem, dc: str, chip: str, tp: int, found: tuple,
             admits: frozenset[int] | None = None, sets: tuple[dict, bool] = ({}, False)) -> list[Pool]:
    """The P queues of one physical pool, from its instance's :func:`p_tiers` ("set" queues: ``admits``).

    The "mix" tiers; a "light" queue at the cap where the pool has light and heavy classes, unless the
    heavy/light split takes its place; and the pool's whole-instance "set" queues (``sets``, from
    :func:`_pool_sets`: set → tiers, and whether the heavy/light split is taken), each its classes in
    proportion among themselves and priced at their exact moments (:func:`placer.p_queues.set_wait_law`).
    The heavy/light split: where the pool has light and heavy classes and its heavy ones can be on time
    at the cap (:func:`heavy_on_time`), the "heavy" queue (the classes not light) and the light classes'
    at the cap replace the light queue (a light queue beside the split made relay cases' plans miss:
    5g-low-hit planned 1.26 s, simulated 1.11 s against a 1 s SLA); where a light queue stays beside mix
    tiers, the mix tiers take whole instances and the layout lays the light queue after them, so no light
    prompt waits behind a mix tier's long one on a shared instance (:func:`placer.ilp.p_cuts.add_whole_sets`). The tail
    cuts (:mod:`placer.ilp.p_cuts`): each cut's below-θ and at/above-θ sets at u·{1, .7, .45}, so one
    pool may prefill only the long prompts while another takes the rest (PrfaaS's split). Set queues own
    whole instances (``Pool.whole``: a set's tiers together an integer count, :func:`whole_sets`): an
    instance a set queue shared with another queue would be one FCFS line
    (:func:`placer.p_queues.queue_layout`), short prompts behind long ones, which neither law sees; their
    labels put the kind first ('set:…/u<tier>', :attr:`Pool.queue`), so they sort before every other
    queue of the pool, a set's tiers side by side, and the layout lays them from the first instance,
    whole, whatever the other queues (or idle shares a plan does not list) take."""
    tiers, light_queue, _ = found
    if admits:
        return [Pool(P, dc, chip, tp, rho, set_queue_name(problem, admits), admits=admits) for rho in tiers]
    queues = [Pool(P, dc, chip, tp, rho, MIX) for rho in tiers]
    by_set, taken = sets
    if light_queue and not taken:
        queues.append(Pool(P, dc, chip, tp, problem.options.utilization_cap, LIGHT))
    queues += [Pool(P, dc, chip, tp, rho, set_queue_name(problem, s), admits=s, whole=True)
               for s, rhos in by_set.items() for rho in rhos]
    return queues


def chip_p_queues(problem: Problem, dc: str, chip: str, shapes: dict, admits: frozenset[int] | None,
                  tiers: dict, mode: int = SPLIT_LIGHT) -> list[tuple[Pool, InstanceModel]]:
    """The P queues of one chip's candidate shapes in a datacenter (``shapes``: tp → instance), each
    with its instance (:func:`p_queues`; the set queues of split ``mode``, :func:`_pool_sets`).
    ``tiers``: (chip, tp, admits) → :func:`p_tiers` and (chip, tp, mode) → its set queues, filled here
    (the same in every datacenter)."""
    out = []
    for tp, im in shapes.items():
        if (chip, tp, admits) not in tiers:
            tiers[chip, tp, admits] = p_tiers(problem, im, admits)
        found = tiers[chip, tp, admits]
        sets: tuple[dict, bool] = ({}, False)
        if admits is None and mode > SPLIT_NONE:
            if (chip, tp, mode) not in tiers:
                tiers[chip, tp, mode] = _pool_sets(problem, im, found, mode)
            sets = tiers[chip, tp, mode]
        out += [(pool, im) for pool in p_queues(problem, dc, chip, tp, found, admits, sets)]
    return out


#: The heavy/light split alone (two whole-instance queues, two integer columns per pool) is generated where at
#: most this many P pools would take it: on eight-dc's 54 (sixteen-dc's 115) it made the proof 4-7x
#: slower for 0.6-2 % BCR; the flagship has 5, a relay case 2-4. Beyond it a plan note says so.
SPLIT_MAX_POOLS = 16
#: The tail cuts (:mod:`placer.ilp.p_cuts`), the highest first, are generated while the scenario's P pools
#: (every candidate shape, dominated ones too) would hold at most this many set-queue columns (each cut's two
#: sets at 3 tiers); a plan note says how many are left out. Measured on the Mooncake trace (8 P shapes, 48
#: columns a cut; PDD alone 5.9 s): 2 cuts (112 columns) 7.7 s, BCR 147.8; 3 cuts 12.6 s, the same BCR.
SET_COLUMNS_MAX = 130


def _p_candidates(problem: Problem, tiers: dict) -> list[tuple[str, int, InstanceModel]]:
    """Every (chip, shape, instance) PDD may prefill on, once per datacenter that holds it (PDD's
    candidates whatever the architecture, so a baseline never gets the split where PDD does not);
    ``tiers`` gets each one's :func:`p_tiers`."""
    longest = max(c.input_tokens + c.output_tokens for c in problem.classes)
    out = []
    for dc in checked(problem.datacenters, every=1):
        for chip, chips in dc.inventory.items():
            for tp in candidate_shapes(problem, chips):
                im = instance(problem, chip, tp)
                if im.unsupported or not im.fits(longest):
                    continue
                if (chip, tp, None) not in tiers:
                    tiers[chip, tp, None] = p_tiers(problem, im)
                out.append((chip, tp, im))
    return out


def _set_columns(problem: Problem, tiers: dict, pools: list, mode: int) -> int:
    """The set-queue columns the scenario's P pools would hold in split ``mode``."""
    count = 0
    for chip, tp, im in checked(pools, every=CHECK_POOLS):
        if (chip, tp, mode) not in tiers:
            tiers[chip, tp, mode] = _pool_sets(problem, im, tiers[chip, tp, None], mode)
        count += sum(len(rhos) for rhos in tiers[chip, tp, mode][0].values())
    return count


#: Pools between two deadline checks in the P split's loops: each pool's heavy-queue law takes a few
#: milliseconds (~4 ms here; a 40-datacenter mesh has 400 such pools, ~1.5 s under load, which never
#: looked at the clock).
CHECK_POOLS = 8


def split_mode(problem: Problem, tiers: dict, notes: list[str]) -> int:
    """How far the model's P split goes (:mod:`placer.ilp.p_cuts`): the heavy/light split where at most
    :data:`SPLIT_MAX_POOLS` pools would take it (else none, and no cuts), and the tail cuts
    (:func:`placer.ilp.p_cuts.tail_cuts`: the classes above θ late on every P instance for their prefill
    alone), the highest first, as many as keep the scenario's P pools within :data:`SET_COLUMNS_MAX`
    set-queue columns (SPLIT_LIGHT + their count; a note says what the limit leaves out). ``tiers``: as
    :func:`chip_p_queues` fills it (filled here too)."""
    pools = _p_candidates(problem, tiers)
    count = sum(bool(tiers[chip, tp, None][1]) and heavy_on_time(problem, im, tiers[chip, tp, None][2])
                for chip, tp, im in checked(pools, every=CHECK_POOLS))
    if count > SPLIT_MAX_POOLS:
        notes.append(f"no heavy/light P split: {count} P pools would take it (> {SPLIT_MAX_POOLS}: its "
                     "whole-instance queues would slow the proof several-fold); mix and light queues only")
        return SPLIT_NONE
    hopeless = {k for k, c in enumerate(problem.classes)
                if all(im.prefill_s(c.input_tokens, c.hit_rate) > problem.ttft_p90_s for _, _, im in pools)}
    cuts = tail_cuts(problem, hopeless)
    best = 0
    for c in range(1, cuts + 1):
        if _set_columns(problem, tiers, pools, SPLIT_LIGHT + c) > SET_COLUMNS_MAX:
            break
        best = c
    if best < cuts:
        notes.append(f"threshold-split P queues: {best} of the {cuts} tail cuts; more would exceed "
                     f"{SET_COLUMNS_MAX} set-queue columns")
    return SPLIT_LIGHT + best
