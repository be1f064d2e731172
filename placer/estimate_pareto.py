"""The decode frontier of one model on one chip: ``placer estimate --pareto``.

in:  a model and a chip (catalog names), the chips per instance to try (default the scenario's
     ``options.tp_degrees``) and optionally one ``shape``, the request shape (input I, output O,
     hit h), dtypes, the prefill chunk, MTP's accepted tokens per step, an optional TPOT to meet,
     the engine and optional measured profiles — the inputs of :func:`placer.estimate.estimate`
out: a :class:`Pareto`: the Pareto-optimal (tokens/s per GPU, tokens/s per user) points over decode
     batches and instance shapes, each with its batch, shape, TPOT, whether it meets the TPOT and
     the source of its step time; what was left out and why (docs/contracts.md "Estimate JSON").

The figures are :func:`placer.estimate.estimate`'s, per candidate (shape, batch B) at the mean
context L = I + O/2:

* TPOT = step_s(B, L) / accept; tokens/s per user = 1 / TPOT;
  tokens/s per GPU = B × accept / step_s(B, L) / chips (the decode phase, as a decode pool runs it).
* Batches: 1, 2, 3, 4, 6, 8, 12, … (powers of two and the halfway 1.5×) up to the instance's batch
  cap, plus the largest batch memory allows and, with a TPOT, the largest batch meeting it. A batch
  whose KV (B sequences of I + O tokens, what the simulator reserves at admission) does not fit is
  excluded, and the exclusion is reported per shape; so is a shape where one request does not fit.
* Frontier: a point stays when no other point is at least as fast per user and per GPU and faster
  in one; sorted fastest per user first, per-GPU throughput then rises strictly along it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from placer.catalog import get_model
from placer.errors import InputError
from placer.estimate import check_engine, check_request, instance, named_source, packed_prefill_tokens_per_s
from placer.perfmodel.engines import ROOFLINE
from placer.profiles.measured import source_of_step
from placer.profiles.records import LatestLoader
from placer.shapes import SHAPE_KINDS, shapes_for, stage_label, why_not
from placer.specs import OptionsSpec

#: The chips per instance tried when none are given: the scenario's default ``options.tp_degrees``.
DEFAULT_TPS = tuple(OptionsSpec.model_fields["tp_degrees"].default_factory())


@dataclass(frozen=True)
class ParetoPoint:
    """One candidate (shape, batch) of the frontier (seconds, tokens/s)."""

    chips: int
    shape: str
    layout: str
    batch: int
    tpot_s: float
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    decode_tokens_per_s: float
    prefill_tokens_per_s_per_gpu: float
    fits_memory: bool
    meets_tpot: bool | None
    source: str


@dataclass(frozen=True)
class Pareto:
    """The frontier and what it assumed (the keys of docs/contracts.md "Estimate JSON", ``--pareto``)."""

    model: str
    chip: str
    engine: str
    input_tokens: int
    output_tokens: int
    hit_rate: float
    weight_dtype: str
    kv_dtype: str
    chunk_tokens: int
    mtp_accept: float
    target_tpot_s: float | None
    candidates: int
    points: list[ParetoPoint] = field(default_factory=list)
    excluded: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def batch_grid(cap: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, … up to ``cap``: powers of two and the 1.5× between them."""
    grid, b = [], 1
    while b <= cap:
        grid += [b] + ([b * 3 // 2] if b >= 2 and b * 3 // 2 <= cap else [])
        b *= 2
    return grid


def frontier(points: list[ParetoPoint]) -> list[ParetoPoint]:
    """The non-dominated points, fastest per user first (per GPU then strictly rising)."""
    ordered = sorted(points, key=lambda p: (-p.tokens_per_s_per_user, -p.tokens_per_s_per_gpu))
    kept: list[ParetoPoint] = []
    for p in ordered:
        if not kept or p.tokens_per_s_per_gpu > kept[-1].tokens_per_s_per_gpu:
            kept.append(p)
    return kept


def pareto(model: str, chip: str, tps: list[int] | tuple[int, ...] | None = None, weight_dtype: str | None = None,
           kv_dtype: str | None = None, input_tokens: int = 2048, output_tokens: int = 256, hit_rate: float = 0.0,
           tpot_s: float | None = None, chunk_tokens: int = 8192, mtp_accept: float = 1.0,
           profiles: str | Path | None = None, latest: LatestLoader | None = None, shape: str | None = None,
           engine: str = ROOFLINE) -> Pareto:
    """The decode frontier of ``model`` on ``chip`` (see the module docstring)."""
    check_request(input_tokens, output_tokens, hit_rate, tpot_s)
    engine = check_engine(engine)
    cfg = get_model(model)
    explicit = tps is not None
    tps = list(tps) if explicit else list(DEFAULT_TPS)
    for tp in tps:
        if not (isinstance(tp, int) and tp >= 1):
            raise InputError(f"tp must be a positive integer, got {tp!r}")
    if shape is not None and shape not in SHAPE_KINDS:
        raise InputError(f"shape must be one of {', '.join(SHAPE_KINDS)}, got {shape!r}")
    resident, context = input_tokens + output_tokens, input_tokens + output_tokens / 2
    candidates: list[ParetoPoint] = []
    excluded: list[dict] = []
    dtypes = None
    for tp in tps:
        kinds = (shape,) if shape else SHAPE_KINDS
        if shape and why_not(cfg, tp, shape):
            excluded.append({"chips": tp, "shape": shape, "reason": why_not(cfg, tp, shape)})
        for chosen in shapes_for(cfg, tp, kinds):
            try:
                im, chosen = instance(model, chip, tp, weight_dtype, kv_dtype, chunk_tokens, mtp_accept, profiles,
                                      latest, chosen.kind, engine)
            except InputError as e:  # a dtype the chip lacks, a model it cannot hold: every shape says so
                excluded.append({"chips": tp, "shape": chosen.kind, "reason": str(e)})
                continue
            dtypes = (im.weight_dtype, im.kv_dtype)
            if not im.fits(resident):
                excluded.append({"chips": tp, "shape": chosen.kind,
                                 "reason": f"one request of {resident:,} tokens of KV does not fit beside the weights"})
                continue
            candidates += _points(im, chosen, input_tokens, hit_rate, context, resident, tpot_s, engine, excluded)
    if not candidates:
        raise InputError(f"no instance of {model} on {chip} can decode a request of {resident:,} tokens: "
                         + _reasons(excluded))
    return Pareto(model=model, chip=chip, engine=engine, input_tokens=input_tokens, output_tokens=output_tokens,
                  hit_rate=hit_rate, weight_dtype=dtypes[0], kv_dtype=dtypes[1], chunk_tokens=chunk_tokens,
                  mtp_accept=mtp_accept, target_tpot_s=tpot_s, candidates=len(candidates),
                  points=frontier(candidates), excluded=excluded)


def _reasons(excluded: list[dict]) -> str:
    """Each distinct reason once, with the shapes it left out (``… (1 chip tp, 2 chips tp)``)."""
    shapes: dict[str, list[str]] = {}
    for e in excluded:
        shapes.setdefault(e["reason"], []).append(f"{e['chips']} chip{'s' * (e['chips'] > 1)} {e['shape']}")
    return "; ".join(f"{reason} ({', '.join(where)})" for reason, where in shapes.items()) or "no admissible shape"


def _points(im, chosen, input_tokens: int, hit_rate: float, context: float, resident: int, tpot_s: float | None,
            engine: str, excluded: list[dict]) -> list[ParetoPoint]:
    """The memory-feasible candidates of one shape; the batches memory rules out go to ``excluded``."""
    by_memory = im.max_batch(context, math.inf, resident_tokens=resident)
    grid = batch_grid(im.batch_cap)
    over = [b for b in grid if b > by_memory]
    if over:
        excluded.append({"chips": chosen.chips, "shape": chosen.kind, "batches": over,
                         "reason": f"KV of more than {by_memory:,} sequences of {resident:,} tokens does not fit"})
    batches = {b for b in grid if b <= by_memory} | {by_memory}
    if tpot_s is not None:
        batches.add(im.max_batch(context, tpot_s, resident_tokens=resident))
    prefill_per_gpu = packed_prefill_tokens_per_s(im, input_tokens, hit_rate) / chosen.chips
    points = []
    for b in sorted(x for x in batches if x >= 1):
        step = im.step_s(b, context)
        tpot = step / im.mtp_accept
        points.append(ParetoPoint(
            chips=chosen.chips, shape=chosen.kind, layout=stage_label(chosen), batch=b, tpot_s=tpot,
            tokens_per_s_per_gpu=b / tpot / chosen.chips, tokens_per_s_per_user=1.0 / tpot,
            decode_tokens_per_s=b / tpot, prefill_tokens_per_s_per_gpu=prefill_per_gpu, fits_memory=True,
            meets_tpot=None if tpot_s is None else tpot <= tpot_s,
            source=named_source(im, source_of_step(im, b, context), engine)))
    return points
