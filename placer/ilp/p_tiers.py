"""The P queues of one P pool: their utilisation tiers and admitted classes.

in:  a :class:`~placer.problem.Problem` and one P instance (:class:`~placer.perfmodel.InstanceModel`)
out: :func:`p_tiers` (a pool's "mix" tiers, whether a "light" queue joins them, its heavy classes),
     :func:`p_queues` (its queues as :class:`~placer.ilp.sets.Pool` candidates: "mix" tiers, and a
     "light" queue or the "heavy" and light-set "set" queues on whole instances), :func:`chip_p_queues`
     (a chip's shapes in a datacenter), :func:`split_allowed` (the split left out on large models),
     :func:`tier_utilizations`, :func:`heavy_classes`, :func:`heavy_on_time` — read by
     :mod:`placer.ilp.data` (which re-exports them).
"""

from __future__ import annotations

from dataclasses import replace

from placer.flows import instance, ttft_det_s
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


def p_queues(problem: Problem, dc: str, chip: str, tp: int, found: tuple,
             admits: frozenset[int] | None = None, split: bool = True) -> list[Pool]:
    """The P queues of one physical pool, from its instance's :func:`p_tiers` ("set" queues: ``admits``).

    Where the pool has light and heavy classes: the "mix" tiers, and either a "light" queue at the cap
    or, where ``split`` (:func:`heavy_on_time`, :func:`split_allowed`), two "set" queues at the cap in its
    place, each its classes in proportion among themselves and priced at their exact moments
    (:func:`placer.p_queues.set_wait_law`): the "heavy" queue (the classes not light) and the light
    classes' — so one pool may prefill only the long prompts while another takes the rest (PrfaaS's
    split; the "light" queue's law, any light mix, is a bound too loose for it). Both own whole
    instances (``Pool.whole``: c_{p,t} integer): an instance a set queue shared with another queue
    would be one FCFS line (:func:`placer.p_queues.queue_layout`), short prompts behind long ones,
    which neither law sees; their labels put the kind first ('set:…/u<cap>', :attr:`Pool.queue`), so
    they sort before every other queue of the pool and the layout lays them from the first instance,
    whole, whatever the other queues (or idle shares a plan does not list) take. The light-set queue
    replaces the light queue there: a light queue shares an instance with a mix tier, its light
    prompts behind the mix's long ones, which its law does not see either — beside the split it made
    relay cases' plans miss (5g-low-hit: planned 1.26 s, simulated 1.11 s against a 1 s SLA). At
    the cap only: their own tier grids grew the model by a fifth without changing the flagship's plan."""
    tiers, light_queue, heavy = found
    if admits:
        return [Pool(P, dc, chip, tp, rho, set_queue_name(problem, admits), admits=admits) for rho in tiers]
    queues = [Pool(P, dc, chip, tp, rho, MIX) for rho in tiers]
    if light_queue:
        cap = problem.options.utilization_cap
        if not split:
            queues.append(Pool(P, dc, chip, tp, cap, LIGHT))
        else:
            light = frozenset(range(len(problem.classes))) - heavy
            queues += [Pool(P, dc, chip, tp, cap, set_queue_name(problem, s), admits=s, whole=True)
                       for s in (heavy, light)]
    return queues


def chip_p_queues(problem: Problem, dc: str, chip: str, shapes: dict, admits: frozenset[int] | None,
                  tiers: dict, split: bool = True) -> list[tuple[Pool, InstanceModel]]:
    """The P queues of one chip's candidate shapes in a datacenter (``shapes``: tp → instance), each
    with its instance (:func:`p_queues`; the heavy/light split where ``split`` and :func:`heavy_on_time`).
    ``tiers``: (chip, tp, admits) → :func:`p_tiers`, filled here (the same in every datacenter)."""
    out = []
    for tp, im in shapes.items():
        if (chip, tp, admits) not in tiers:
            found = p_tiers(problem, im, admits)
            tiers[chip, tp, admits] = found, found[1] and heavy_on_time(problem, im, found[2])
        found, splits = tiers[chip, tp, admits]
        out += [(pool, im) for pool in p_queues(problem, dc, chip, tp, found, admits, split and splits)]
    return out


#: The heavy/light split (two whole-instance queues, two integer columns per pool) is generated where at
#: most this many P pools would take it: on eight-dc's 54 (sixteen-dc's 115) it made the proof 4-7x
#: slower for 0.6-2 % BCR; the flagship has 5, a relay case 2-4. Beyond it a plan note says so.
SPLIT_MAX_POOLS = 16


def split_pools(problem: Problem, tiers: dict) -> int:
    """How many of the scenario's P pools would take the split: every datacenter, chip and shape
    (PDD's candidates whatever the architecture, so a baseline never gets the split where PDD does
    not). ``tiers``: as :func:`chip_p_queues` fills it (filled here too)."""
    longest = max(c.input_tokens + c.output_tokens for c in problem.classes)
    count = 0
    for dc in problem.datacenters:
        for chip, chips in dc.inventory.items():
            for tp in candidate_shapes(problem, chips):
                if (chip, tp, None) not in tiers:
                    im = instance(problem, chip, tp)
                    if im.unsupported or not im.fits(longest):
                        continue
                    found = p_tiers(problem, im)
                    tiers[chip, tp, None] = found, found[1] and heavy_on_time(problem, im, found[2])
                count += tiers[chip, tp, None][1]
    return count


def split_allowed(problem: Problem, tiers: dict, notes: list[str]) -> bool:
    """Whether the model may have the heavy/light split: at most :data:`SPLIT_MAX_POOLS` of the scenario's
    P pools would take it (:func:`split_pools`); else a note says why it is left out."""
    count = split_pools(problem, tiers)
    if count <= SPLIT_MAX_POOLS:
        return True
    notes.append(f"no heavy/light P split: {count} P pools would take it (> {SPLIT_MAX_POOLS}: its "
                 "whole-instance queues would slow the proof several-fold); mix and light queues only")
    return False
