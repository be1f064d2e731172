"""Instance shapes in the MILP's data: which shapes of which chip counts become candidate pools.

in:  a :class:`~placer.problem.Problem` (its ``options.instance_shapes`` and ``tp_degrees``), and the
     candidate pools :func:`placer.ilp.data.candidate_pools` built with their instance models and
     decode designs
out: :func:`candidate_shapes` (each chip count in each admissible shape, :mod:`placer.shapes`),
     :func:`shape_notes` (the deprecation note; an InputError when no shape is admissible) and
     :func:`drop_dominated` (pools whose shape another shape of the same chips beats on every
     parameter the MILP reads: never in an optimum, so no variable; the plan's notes say which).

Every admissible shape of (datacenter, chip, chip count) is its own candidate pool, so the MILP weighs
them against each other at the same price and power; dominance only removes the shapes that cannot win.
"""

from __future__ import annotations

from placer.errors import InputError
from placer.pdd import AGG, P
from placer.perfmodel import InstanceModel
from placer.problem import Problem
from placer.shapes import PP, SHAPE_KINDS, Shape, shapes_for, why_not


def candidate_shapes(problem: Problem, count: int) -> list[Shape]:
    """Each of ``options.tp_degrees`` that ``count`` chips allow, in each admissible shape of
    ``options.instance_shapes`` (:func:`placer.shapes.shapes_for`): every shape its own candidate pool.
    The deprecated ``pipeline_parallel: true`` keeps its meaning: pp replaces tp where pp is admissible."""
    out = []
    for tp in problem.options.tp_degrees:
        if tp <= count:
            shapes = shapes_for(problem.model, tp, problem.options.shape_kinds)
            forced = problem.options.pipeline_parallel and any(s.kind == PP for s in shapes)
            out += [s for s in shapes if s.kind == PP] if forced else shapes
    return out


def shape_notes(problem: Problem) -> list[str]:
    """What the plan should say about the scenario's shapes; an InputError when none is admissible."""
    kinds = problem.options.shape_kinds
    if not any(shapes_for(problem.model, tp, kinds) for tp in problem.options.tp_degrees):
        why = "; ".join(f"{k}: {why_not(problem.model, max(problem.options.tp_degrees), k)}" for k in kinds)
        raise InputError(f"options.instance_shapes: none of {list(kinds)} is admissible for {problem.model.name} "
                         f"on tp_degrees {problem.options.tp_degrees} ({why})")
    if "pipeline_parallel" in problem.options.model_fields_set:
        forced = " (pp in place of tp where pp is admissible)" if problem.options.pipeline_parallel else ""
        return [f"options.pipeline_parallel is deprecated: read as instance_shapes {list(kinds)}{forced}"]
    return []


def _p_profile(problem: Problem, im: InstanceModel) -> tuple[float, ...]:
    """What the MILP reads of a P pool, each "more is better": minus each class's prefill seconds,
    KV capacity (bytes), RDMA bandwidth (bytes/s)."""
    return (*(-im.prefill_s(c.input_tokens, c.hit_rate) for c in problem.classes), im.kv_capacity_bytes,
            im.rdma_bytes_per_s)


def _decode_profile(design, im: InstanceModel) -> tuple[float, ...]:
    """What the MILP reads of a decode pool, each "more is better": its rows' capacities per instance —
    slots B (RLD's relay busy is about the transfer time whatever the step), tokens/s B / step (C-rows
    of MD and D: output × step per request), KV byte-seconds K / step and K — and RDMA bandwidth."""
    step = design.step_s
    return (design.batch, design.batch / step, im.kv_capacity_bytes / step, im.kv_capacity_bytes,
            im.rdma_bytes_per_s)


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x >= y for x, y in zip(a, b, strict=True))


def drop_dominated(problem: Problem, pools: list, instances: dict, decode: dict, notes: list[str]) -> list:
    """``pools`` without those of a shape that another shape of the same (role, datacenter, chip, chip
    count) dominates: at least as good on every parameter the MILP reads of the pool (P: each class's
    prefill time, KV capacity, RDMA bandwidth; decode: :func:`_decode_profile`) at the same price and power. Ties keep the first shape in ``SHAPE_KINDS`` order. A pools
    (aggregated) are kept whole. The dropped pools leave ``instances`` and ``decode`` too; each drop
    is noted ("MD H200-SXM tp8: dominated by tp8-dep")."""
    profiles: dict[tuple, tuple[float, ...]] = {}
    by_shape: dict[tuple, tuple[float, ...]] = {}  # a profile is the instance's, whatever its datacenter
    for q in pools:
        if q.role != AGG and q.key not in profiles:
            shape = (q.role, q.chip, q.tp)
            if shape not in by_shape:
                im = instances[q]
                by_shape[shape] = _p_profile(problem, im) if q.role == P else _decode_profile(decode[q], im)
            profiles[q.key] = by_shape[shape]
    dropped = {}
    siblings: dict[tuple, list] = {}  # (role, dc, chip) -> its keys, grouped once (100 sites: 2.8 s as a scan)
    for k in profiles:
        siblings.setdefault(k[:3], []).append(k)
    for key, prof in profiles.items():
        rivals = [k for k in siblings[key[:3]] if k[3] != key[3] and int(k[3]) == int(key[3])]
        for other in rivals:
            beats = _dominates(profiles[other], prof)
            if beats and (not _dominates(prof, profiles[other]) or _order(other[3]) < _order(key[3])):
                dropped[key] = other[3]
                break
    notes += [f"{k[0]} {k[2]} tp{k[3]}: dominated by tp{by} (no better on any planning figure)"
              for k, by in dropped.items()]
    for q in pools:
        if q.key in dropped:
            instances.pop(q, None)
            decode.pop(q, None)
    return [q for q in pools if q.key not in dropped]


def _order(shape: Shape) -> int:
    return SHAPE_KINDS.index(shape.kind)
