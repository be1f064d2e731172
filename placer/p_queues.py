"""The P queues: which classes are light, their waiting-time laws, how a pool's queues lie on its
instances, and the quantile of a mixture of TTFT laws (split from :mod:`placer.flows`).

in:  a :class:`~placer.problem.Problem` and its classes, a P instance's model
     (:class:`~placer.perfmodel.InstanceModel`), a queue's utilisation and kind (PDD's ``mix`` /
     ``light``, :mod:`placer.pdd`)
out: :func:`light_classes`, :func:`prefill_points` (a class's prompts with their spread),
     :func:`queue_wait_law`, :func:`set_wait_law` and :func:`packed_wait_law` (M/G/1 laws,
     :class:`placer.queueing.WaitModel`),
     :func:`queue_layout` (from :mod:`placer.pdd`), :func:`mixture_quantile` over :class:`TtftLaw` flows

The MILP, ``evaluate``, ``validate`` and the simulator read the P side's laws here, the flow's
own physics in :mod:`placer.flows`; this module imports neither them nor the flows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from placer.packed_queue import packed_law
from placer.pdd import HEAVY_PREFILL_SHARE, MIX
from placer.pdd import queue_layout  # noqa: F401 - re-exported: the layout is PDD's rule (placer.pdd)
from placer.perfmodel import InstanceModel
from placer.queueing import WaitModel, split_cv2, spread_points, spread_prompt

if TYPE_CHECKING:
    from placer.problem import Class, Problem

def light_classes(problem: Problem, im: InstanceModel) -> set[int]:
    """Indices of the classes whose prefill on ``im`` is at most HEAVY_PREFILL_SHARE of the TTFT SLA."""
    budget = HEAVY_PREFILL_SHARE * problem.ttft_p90_s
    return {k for k, c in enumerate(problem.classes) if im.prefill_s(c.input_tokens, c.hit_rate) <= budget}


def prefill_points(c: Class, im: InstanceModel) -> list[tuple[float, float]]:
    """(probability, prefill seconds alone on ``im``) of class ``c``'s prompts: one point at its
    mean length, or, where its prompts spread (``c.new_tokens_cv2`` > 0), the two lengths of
    :func:`placer.queueing.spread_points` (the class's mean and variance of new tokens), each
    priced at its own length behind the class's cached prefix (:func:`placer.queueing.spread_prompt`)
    — as :func:`placer.queue_laws.class_items` does for evaluate."""
    if c.new_tokens_cv2 <= 0:
        return [(1.0, im.prefill_s(c.input_tokens, c.hit_rate))]
    return [(prob, im.prefill_s(*spread_prompt(c.input_tokens, c.hit_rate, factor)))
            for prob, factor in spread_points(c.new_tokens_cv2)]


def queue_wait_law(problem: Problem, im: InstanceModel, rho: float, mix: str) -> WaitModel:
    """M/G/1 wait at utilisation ``rho`` in a P queue, valid for whatever the plan routes there.

    A "mix" queue takes the classes in the scenario's proportions (the MILP's rows (C13)
    force it), so its service moments are the mix's. A "light" queue takes any mix of
    light classes: E[W] = ρ·E[S²]/(2E[S](1−ρ)) with E[S²]/E[S] ≤ the largest light
    class's own E[S²]/E[S] (its prefill where its prompts do not spread), so a deterministic
    service of that length bounds its wait. Service moments are over each class's spread of
    prompt lengths (:func:`prefill_points`), so a class's long prompts lengthen the wait.

    Arrivals that are not Poisson (``problem.arrival_cv2`` ≠ 1) make it a G/G/1 law at the
    inter-arrival cv² one instance of the queue sees at ``rho`` (:func:`_at_one_instance`): the
    mix's at ρ / E[S] req/s; a light queue's, where arrivals are burstier than Poisson, at the most
    req/s an instance can take at ρ (its shortest light class alone: the largest share, the
    burstiest split), and Poisson where they are more regular (an upper bound on the wait).
    """
    points = [prefill_points(c, im) for c in problem.classes]
    if mix == MIX:
        return _mix_law(problem, rho, [(c.share, pts) for c, pts in zip(problem.classes, points)])

    def residual_s(pts: list[tuple[float, float]]) -> float:  # E[S²]/E[S] of one class
        if len(pts) == 1:
            return pts[0][1]
        return sum(q * t * t for q, t in pts) / sum(q * t for q, t in pts)

    light = light_classes(problem, im)
    longest = max(residual_s(points[k]) for k in light)
    law = WaitModel(rho, longest, longest * longest)
    if problem.arrival_cv2 <= 1.0:  # a stream more regular than Poisson waits less (G/G/1 factor ≤ 1)
        return law
    shortest = min(sum(q * t for q, t in points[k]) for k in light)
    return _at_one_instance(problem, law, rho / shortest if shortest > 0 else 0.0)


def _at_one_instance(problem: Problem, law: WaitModel, instance_rps: float | None = None) -> WaitModel:
    """``law`` under the scenario's arrivals (``problem.arrival_cv2``) as ONE instance of the queue sees
    them at its utilisation: ``instance_rps`` (default ρ / E[S], the req/s that keep it at ρ), its share
    of the stream split at random (:func:`instance_arrival_cv2`, as ``evaluate`` splits a queue's
    req/s over its instances). The MILP prices each utilisation tier at its own law, so a tier's
    share is known before the solve where the queue's total is not."""
    if problem.arrival_cv2 == 1.0:
        return law
    if instance_rps is None:
        instance_rps = law.rho / law.mean_s if law.mean_s > 0 else 0.0
    return dataclasses.replace(law, arrival_cv2=instance_arrival_cv2(problem, instance_rps))


def set_wait_law(problem: Problem, im: InstanceModel, rho: float, admitted: frozenset[int]) -> WaitModel:
    """M/G/1 wait at utilisation ``rho`` in a "set" P queue: it takes only the classes ``admitted``
    (indices), in proportion among themselves (the MILP's rows (C13) force it), so its service
    moments are the subset's mix — shares renormalised over it, each class over its spread of
    prompt lengths (:func:`prefill_points`), as :func:`queue_wait_law` does for the whole mix (and its
    arrivals as one instance sees them at ``rho``)."""
    total = sum(problem.classes[k].share for k in admitted)
    return _mix_law(problem, rho, [(problem.classes[k].share / total, prefill_points(problem.classes[k], im))
                                   for k in sorted(admitted)])


def _mix_law(problem: Problem, rho: float, weighted: list[tuple[float, list[tuple[float, float]]]]) -> WaitModel:
    """The M/G/1 law at ``rho`` of a queue taking classes in proportion — (share, its prefill points)
    each — with its arrivals as one instance sees them (:func:`_at_one_instance`)."""
    times = [(share * prob, t) for share, pts in weighted for prob, t in pts]
    return _at_one_instance(problem, WaitModel(rho, sum(s * t for s, t in times), sum(s * t * t for s, t in times)))


def packed_wait_law(items: list[tuple], instances: float, im: InstanceModel, arrival_cv2: float = 1.0) -> WaitModel:
    """The wait at one P queue whose short prompts may share a forward, length by length.

    ``items``: (req/s, prefill seconds alone, new tokens[, prompt tokens]) per class (or length point)
    routed to the queue, served by ``instances`` instances (arrivals split evenly). A P instance packs
    queued prompts of fewer than ``chunk`` new tokens, FCFS, into one forward of at most ``chunk``
    tokens (as GPU serving engines' schedulers and the simulator do — the executor's engine scheduler
    too, but its P role prefills ONE order per loop turn, ``executor/roles/p.py``, which the simulator
    replays with ``SimConfig.runtime``): a prompt that finds the last queued forward with room for its
    own tokens *rides* it, skipping that forward's time and adding only its marginal cost.

    Returns :class:`~placer.packed_queue.PackedWait`: the queue's work as an M/G/1 law (each arrival's
    jump — its prefill alone, or its marginal when it rides — a service point: the queue's utilisation
    and the planning rule's check), and :meth:`~placer.packed_queue.PackedWait.for_tokens`, the wait a
    prompt of a given length meets (:mod:`placer.packed_queue`: a tiny prompt rides most queued
    forwards, a long one only behind short ones) with its forward-mates' time. Without short prompts,
    or at low load, this is the plain M/G/1 law; overloaded (or without instances), ρ = 1.
    ``arrival_cv2``: the squared coefficient of variation of the instance's inter-arrival times (1:
    Poisson; else the G/G/1 time scale of :class:`~placer.queueing.WaitModel`, :func:`instance_arrival_cv2`).
    """
    return packed_law(items, instances, im, arrival_cv2)


def instance_arrival_cv2(problem: Problem, instance_rps: float) -> float:
    """The inter-arrival cv² one P instance sees: the scenario's stream (``problem.arrival_cv2``,
    ``arrival_rps``) split at random down to the instance's ``instance_rps``
    (:func:`placer.queueing.split_cv2`: a small share of any stream is nearly Poisson)."""
    if problem.arrival_cv2 == 1.0 or problem.arrival_rps <= 0:
        return 1.0
    return split_cv2(problem.arrival_cv2, instance_rps / problem.arrival_rps)


# --- TTFT of a mixture of flows --------------------------------------------------------

class TtftLaw(Protocol):
    """One flow's TTFT: ``det_s`` (deterministic part) plus its P queue's ``wait``, at ``rps``."""

    rps: float
    det_s: float
    wait: WaitModel


#: Relative precision of :func:`mixture_quantile` (a microsecond on a second).
QUANTILE_REL_TOL = 1e-6


def _mixture_cdf(flows: Sequence[TtftLaw], total_rps: float, t: float) -> float:
    return sum(f.rps * (1.0 - f.wait.prob_exceeds(t - f.det_s)) for f in flows) / total_rps


def mixture_cdf(flows: Sequence[TtftLaw], t: float) -> float:
    """The share of the flows' requests (mixed by their rates) whose TTFT is at most ``t`` (1 without traffic)."""
    total = sum(f.rps for f in flows)
    return _mixture_cdf(flows, total, t) if total > 0 else 1.0


def mixture_quantile(flows: Sequence[TtftLaw], q: float) -> float:
    """The ``q`` quantile of TTFT over requests of ``flows`` mixed by their rates (0 without traffic)."""
    total = sum(f.rps for f in flows)
    if total <= 0:
        return 0.0
    lo, hi = 0.0, max(f.det_s for f in flows) + 1.0
    while _mixture_cdf(flows, total, hi) < q and hi < 1e7:
        lo, hi = hi, hi * 2
    for _ in range(80):  # to QUANTILE_REL_TOL of the answer (each halving evaluates every flow's law)
        if hi - lo <= QUANTILE_REL_TOL * hi:
            break
        mid = (lo + hi) / 2
        if _mixture_cdf(flows, total, mid) < q:
            lo = mid
        else:
            hi = mid
    return hi
