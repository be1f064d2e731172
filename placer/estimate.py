"""One instance's predicted figures, no ILP: the library function behind ``placer estimate``.

in:  a model and a chip (catalog names), ``tp`` chips per instance and their ``shape``
     (:mod:`placer.shapes`: tp | pp | dep; default the legacy layout, :func:`~placer.shapes.legacy_shape`),
     dtypes, one request
     shape (input I, output O, prefix hit h), a decode batch or a TPOT, the prefill chunk,
     MTP's accepted tokens per step, optionally measured profiles
out: an :class:`Estimate` with the keys of docs/contracts.md "Estimate JSON".

Definitions (every figure from :class:`placer.perfmodel.InstanceModel`):

* ``prefill_s`` — one prompt alone: ``InstanceModel.prefill_s(I, h)``. ``ttft_s`` — the same
  for one instance: it samples the first token at the end of its last prefill forward and
  streams it, no decode step first (docs/contracts.md "TTFT"); in a disaggregated plan the
  KV's move to the first decoder adds on (``placer.flows.ttft_det_s``), which is the plan's,
  not the instance's.
* ``prefill_tokens_per_s`` — input tokens/s (cached ones included) at saturation, prompts
  packed into forwards as the simulator packs them (placer.sim.prefill): a prompt of
  n = (1−h)·I new tokens shorter than the chunk shares a forward with ⌊chunk/n⌋ − 1 others
  (the weights are read once, FLOPs and KV bytes add up); a longer one is chunked alone.
* decode at the mean context L = I + O/2 with a batch ``--batch`` B, else the largest B
  meeting ``--tpot`` and memory (memory alone without a TPOT); ``decode_tokens_per_s`` =
  B × accept / step_s(B, L) (MTP: ``accept`` tokens emitted per verification step).
* ``max_batch`` — the largest batch meeting the TPOT (if given) and memory, each sequence
  holding I + O tokens of KV (what the simulator reserves at admission).
* ``bound`` — the largest of the compute, memory and communication terms of each phase.
* ``shape`` — the instance shape the figures are for (tp, pp or dep) and ``layout`` — it in words
  (``tp8 × pp2``, ``attention-dp8 × ep8``).
* per GPU and per user, as the peers' users read them: ``tpot_s`` = step_s / accept (one
  sequence's time per output token at that batch), ``tokens_per_s_per_user`` = 1 / tpot_s,
  ``tokens_per_s_per_gpu`` = decode_tokens_per_s / chips, ``prefill_tokens_per_s_per_gpu`` =
  prefill_tokens_per_s / chips (``chips`` = ``--tp``, every chip of the instance).
* the request and the engine the figures assume are echoed: ``input_tokens``, ``output_tokens``,
  ``hit_rate``, ``weight_dtype``, ``kv_dtype``, ``chunk_tokens``, ``mtp_accept``, ``chips``, ``engine``.
* ``engine`` — the serving engine whose kernels the figures assume (:data:`placer.specs.ENGINES`,
  optionally ``name==version``): the instance model passes through
  :func:`placer.perfmodel.engines.engine_model`; ``source`` says what answered each phase.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import get_args

from placer.catalog import get_chip, get_model
from placer.errors import InputError
from pydantic import TypeAdapter, ValidationError

from placer.perfmodel import InstanceModel
from placer.perfmodel.engines import ROOFLINE, engine_model, split_engine, unknown_version
from placer.profiles.lookup import measured_instance
from placer.profiles.records import LatestLoader
from placer.profiles.measured import MeasuredInstanceModel, source_of_prompt, source_of_step
from placer.specs import ENGINES, Engine, KvDtype, WeightDtype
from placer.shapes import DEP, PP, SHAPE_KINDS, Shape, is_moe, legacy_shape, shape_model, stage_label, why_not

#: What ``--weight-dtype`` / ``--kv-dtype`` accept: every type a scenario may name (placer.specs).
WEIGHT_DTYPES = tuple(get_args(WeightDtype))
KV_DTYPES = tuple(get_args(KvDtype))
_ENGINE = TypeAdapter(Engine)


@dataclass(frozen=True)
class Estimate:
    """The keys of docs/contracts.md "Estimate JSON" (seconds, tokens/s, bytes)."""

    prefill_s: float
    prefill_tokens_per_s: float
    decode_batch: int
    decode_step_s: float
    decode_tokens_per_s: float
    max_batch: int
    kv_bytes_per_token: float
    ttft_s: float
    bound: dict
    source: str
    shape: str
    layout: str
    tpot_s: float
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    prefill_tokens_per_s_per_gpu: float
    chips: int
    input_tokens: int
    output_tokens: int
    hit_rate: float
    weight_dtype: str
    kv_dtype: str
    chunk_tokens: int
    mtp_accept: float
    engine: str
    #: the context each decode step is priced at: I + O/2 tokens (the mean over a request's decode)
    decode_context_tokens: float = 0.0
    #: what chose ``decode_batch``: "--batch" (given), "--tpot" (the largest meeting it and memory) or
    #: "memory" (the largest whose KV fits)
    batch_from: str = "memory"
    #: the ``--tpot`` the batch was chosen to meet; None when not given
    target_tpot_s: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _check(name: str, value, ok: bool, what: str) -> None:
    if not ok:
        raise InputError(f"{name} must be {what}, got {value!r}")


def check_engine(engine: str) -> str:
    """``engine`` if :data:`placer.specs.Engine` admits it and a pinned version is one placer ships tables
    for (:func:`~placer.perfmodel.engines.unknown_version`), else InputError naming ``--engine`` and the value."""
    try:
        engine = _ENGINE.validate_python(engine)
    except ValidationError:
        raise InputError(f"--engine must be one of {', '.join(ENGINES)}, optionally pinned as name==version "
                         f"(e.g. vllm==0.24.0), got {engine!r}") from None
    why = unknown_version(engine)
    if why:
        raise InputError(f"--engine {engine!r}: {why}")
    return engine


def instance(model: str, chip: str, tp: int, weight_dtype: str | None = None, kv_dtype: str | None = None,
             chunk_tokens: int = 8192, mtp_accept: float = 1.0, profiles: str | Path | None = None,
             latest: LatestLoader | None = None, shape: str | None = None, engine: str = ROOFLINE):
    """(The instance's model, its :class:`~placer.shapes.Shape`) after checking every input (bad input
    raises InputError naming it): the roofline of ``shape`` (None: :func:`~placer.shapes.legacy_shape`), with the chip's measured
    efficiencies and, where ``profiles`` holds a table for exactly this (chip, tp, model, dtypes) and
    the shape is one tables are measured in (dense tp, MoE dep), a
    :class:`~placer.profiles.measured.MeasuredInstanceModel`; then as ``engine`` answers it
    (:func:`~placer.perfmodel.engines.engine_model`)."""
    engine = check_engine(engine)
    cfg = get_model(model)
    _check("tp", tp, isinstance(tp, int) and tp >= 1, "a positive integer")
    weight_dtype = weight_dtype or cfg.native_weight_dtype
    kv_dtype = kv_dtype or "bf16"
    _check("weight_dtype", weight_dtype, weight_dtype in WEIGHT_DTYPES, f"one of {', '.join(WEIGHT_DTYPES)}")
    _check("kv_dtype", kv_dtype, kv_dtype in KV_DTYPES, f"one of {', '.join(KV_DTYPES)}")
    _check("chunk", chunk_tokens, chunk_tokens >= 1, "at least 1 token")
    _check("mtp_accept", mtp_accept, 1.0 <= mtp_accept, "at least 1 (tokens accepted per decode step)")
    _check("shape", shape, shape is None or shape in SHAPE_KINDS, f"one of {', '.join(SHAPE_KINDS)}")
    why = shape and why_not(cfg, tp, shape)
    if why:
        raise InputError(f"shape {shape!r} on tp {tp} chips of {cfg.name}: {why}")
    im = measured_instance(cfg, get_chip(chip), tp, weight_dtype, kv_dtype, profiles, chunk_tokens, latest)
    if im.unsupported:
        raise InputError(im.unsupported)
    chosen = Shape(tp, shape) if shape else legacy_shape(cfg, im.chip, tp, weight_dtype, kv_dtype)
    if not (isinstance(im, MeasuredInstanceModel) and chosen.kind != PP and (chosen.kind == DEP) == is_moe(cfg)):
        im = shape_model(chosen, im.chip, cfg, weight_dtype, kv_dtype, chunk_tokens)
    return engine_model(dataclasses.replace(im, mtp_accept=mtp_accept), engine), chosen


def packed_prefill_tokens_per_s(im: InstanceModel, input_tokens: float, hit_rate: float) -> float:
    """Input tokens/s of ``im`` at saturation, short prompts packed into shared forwards.

    A measured table knows one prompt per forward: a packed forward of k prompts is read as
    one forward of k × new tokens after the same cached context (its attention slightly
    overcounted, the weight read shared as in the roofline)."""
    new = max(1.0, (1.0 - hit_rate) * input_tokens)
    chunk = im.prefill_chunk_tokens
    if new >= chunk:
        return input_tokens / im.prefill_s(input_tokens, hit_rate)
    k = max(1, math.floor(chunk / new))
    if isinstance(im, MeasuredInstanceModel):
        return k * input_tokens / im.prefill_chunk_s(input_tokens, input_tokens - new, k * new)
    flops, kv_bytes = im.prefill_chunk_parts(input_tokens, input_tokens - new, new)
    forward = im.forward_s(k * flops, im.weight_bytes + k * kv_bytes, k * new)
    return k * input_tokens / forward


def named_source(im: InstanceModel, source: str, engine: str = ROOFLINE) -> str:
    """``source`` as users read it: a roofline whose efficiencies were measured names that profile; a
    roofline answering for an engine says that none of the engine's measured kernels did."""
    if not source.startswith("roofline"):
        return source
    if im.chip.profile:
        source = f"{source} with measured efficiencies ({im.chip.profile})"
    if split_engine(engine)[0] != ROOFLINE:
        source = f"{source}: no measured {engine} kernels answered for {im.chip.name}"
    return source


def _source(im: InstanceModel, input_tokens: int, hit_rate: float, batch: int, context: float, engine: str) -> str:
    """Where the figures come from: one answer when both phases agree, else each phase's."""
    prefill = named_source(im, source_of_prompt(im, input_tokens, hit_rate), engine)
    decode = named_source(im, source_of_step(im, batch, context), engine)
    return prefill if prefill == decode else f"prefill: {prefill}; decode: {decode}"


def _bound(terms: dict[str, float]) -> str:
    return max(terms, key=terms.get)


def check_request(input_tokens: int, output_tokens: int, hit_rate: float, tpot_s: float | None) -> None:
    """InputError naming the first bad field of the request shape (and the TPOT to meet)."""
    _check("input", input_tokens, input_tokens >= 1, "at least 1 token")
    _check("output", output_tokens, output_tokens >= 1, "at least 1 token")
    _check("hit", hit_rate, 0.0 <= hit_rate < 1.0, "in [0, 1)")
    _check("tpot", tpot_s, tpot_s is None or tpot_s > 0, "positive seconds")


def estimate(model: str, chip: str, tp: int, weight_dtype: str | None = None, kv_dtype: str | None = None,
             input_tokens: int = 2048, output_tokens: int = 256, hit_rate: float = 0.0, batch: int | None = None,
             tpot_s: float | None = None, chunk_tokens: int = 8192, mtp_accept: float = 1.0,
             profiles: str | Path | None = None, latest: LatestLoader | None = None,
             shape: str | None = None, engine: str = ROOFLINE) -> Estimate:
    """The predicted figures of one instance (see the module docstring for each definition)."""
    check_request(input_tokens, output_tokens, hit_rate, tpot_s)
    _check("batch", batch, batch is None or batch >= 1, "at least 1")
    if batch is not None and tpot_s is not None:
        raise InputError("give --batch or --tpot, not both")
    im, chosen = instance(model, chip, tp, weight_dtype, kv_dtype, chunk_tokens, mtp_accept, profiles, latest, shape,
                          engine)
    resident = input_tokens + output_tokens
    if not im.fits(resident):
        raise InputError(f"{model} at {im.weight_dtype} does not fit on {tp} x {chip} ({stage_label(chosen)}) with "
                         f"one request of {resident} tokens of KV; raise --tp")
    context = input_tokens + output_tokens / 2
    cap = im.max_batch(context, tpot_s if tpot_s is not None else math.inf, resident_tokens=resident)
    decode_batch = batch if batch is not None else cap
    if decode_batch < 1:
        raise InputError(f"no batch meets --tpot {tpot_s:g} s: one sequence's step alone takes "
                         f"{im.step_s(1, context):.4f} s")
    step = im.step_s(decode_batch, context)
    prefill = im.prefill_s(input_tokens, hit_rate)
    prefill_tps = packed_prefill_tokens_per_s(im, input_tokens, hit_rate)
    new = max(1.0, (1.0 - hit_rate) * input_tokens)
    decode_tps = decode_batch * mtp_accept / step
    return Estimate(
        prefill_s=prefill,
        prefill_tokens_per_s=prefill_tps,
        decode_batch=int(decode_batch),
        decode_step_s=step,
        decode_tokens_per_s=decode_tps,
        max_batch=int(cap),
        kv_bytes_per_token=im.kv_bytes_per_token,
        ttft_s=prefill,
        bound={"prefill": _bound(im.terms("prefill", input_tokens, input_tokens - new, min(new, chunk_tokens))),
               "decode": _bound(im.terms("decode", decode_batch, context))},
        source=_source(im, input_tokens, hit_rate, int(decode_batch), context, engine),
        shape=chosen.kind,
        layout=stage_label(chosen),
        tpot_s=step / mtp_accept,
        tokens_per_s_per_gpu=decode_tps / chosen.chips,
        tokens_per_s_per_user=mtp_accept / step,
        prefill_tokens_per_s_per_gpu=prefill_tps / chosen.chips,
        chips=chosen.chips,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        hit_rate=hit_rate,
        weight_dtype=im.weight_dtype,
        kv_dtype=im.kv_dtype,
        chunk_tokens=chunk_tokens,
        mtp_accept=mtp_accept,
        engine=engine,
        decode_context_tokens=context,
        batch_from="--batch" if batch is not None else "--tpot" if tpot_s is not None else "memory",
        target_tpot_s=tpot_s,
    )
