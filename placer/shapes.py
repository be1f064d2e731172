"""Instance shapes: how the chips of one instance split the model, as a planning choice.

in:  a :class:`~placer.catalog.ModelConfig`, a chip count, the scenario's ``options.instance_shapes``
out: :class:`Shape` (an ``int`` — the instance's chip count, as ``tp`` in a plan's pools — that also
     names its kind), :func:`shapes_for` (the admissible shapes of one chip count), :func:`shape_of`
     (a plan row's shape), and the performance models of the two MoE shapes,
     :class:`TPAttentionMoEModel` and :class:`DEPModel` (subclasses of
     :class:`~placer.perfmodel.InstanceModel`).

Kinds (``options.instance_shapes``; default: every kind, each where it is admissible):

* ``tp``  — the instance's ``chips`` chips form one tensor-parallel group. Dense: the roofline
  model as it is. MoE: attention tensor parallel (heads split over the chips), the experts sharded
  over the chips (EP); see :class:`TPAttentionMoEModel`.
* ``pp``  — dense models only, on more chips than one scale-up domain (8) and in whole domains:
  tp 8 inside each node × pp = chips / 8 stages (the bubble and the inter-stage hop are
  :class:`~placer.perfmodel.InstanceModel`'s ``pp`` physics).
* ``dep`` — MoE models only, chips > 1: attention data parallel on every chip × experts
  expert-parallel over all chips (SGLang ``--enable-dp-attention``, TRT-LLM "DEP",
  ``--enable-attention-dp``); see :class:`DEPModel`.

A :class:`Shape` is hashable and used wherever the planner keyed pools by ``tp`` (the fourth element
of a pool key, ``Pool.tp``, ``PoolOut.tp``): two shapes of the same chips are two pools; only a ``tp``
shape equals the plain ``int`` of its chip count. A plain ``int`` (a plan row without ``shape``: plans
written before shapes existed) is read as :func:`legacy_shape`, the layout placer used then (dense tp, or
pp under ``options.pipeline_parallel``; MoE dep where the replicas fit, else tp — the one change: that
last case now copies MLA's KV per chip, which the old model did not).
"""

from __future__ import annotations

from typing import Literal, get_args

from placer.catalog import Chip, ModelConfig
from placer.perfmodel import SCALEUP_DOMAIN_CHIPS, USABLE_MEM_FRACTION, InstanceModel, pipeline_stages

ShapeKind = Literal["tp", "pp", "dep"]
SHAPE_KINDS: tuple[str, ...] = get_args(ShapeKind)
TP, PP, DEP = SHAPE_KINDS


class Shape(int):
    """An instance's chip count (the ``int`` value) and how they split the model (``kind``, ``pp``).

    Arithmetic is the chip count's (``count * shape`` chips); equality and hashing include the kind,
    so ``Shape(16, "pp") != Shape(16, "tp")``. A ``tp`` shape equals (and hashes as) its plain ``int``,
    so rows read back from JSON without the shape (``tp: 16``) still meet it; ``pp`` and ``dep``
    shapes equal no ``int``. ``format`` with no spec (f-strings) gives the label, e.g. ``16``,
    ``16-pp2``, ``8-dep``, so ``f"tp{shape}"`` names a pool uniquely (variable names, notes, labels);
    ``str()``, ``repr``-free JSON and CSV give the chip count, as code that reads ``tp`` as a number
    (launch commands, tables) expects."""

    kind: str
    pp: int

    def __new__(cls, chips: int, kind: str = TP) -> Shape:
        if kind not in SHAPE_KINDS:
            raise ValueError(f"instance shape must be one of {', '.join(SHAPE_KINDS)}, got {kind!r}")
        chips = int(chips)
        if chips < 1:
            raise ValueError(f"an instance has at least one chip, got {chips}")
        if kind == PP and (chips <= SCALEUP_DOMAIN_CHIPS or chips % SCALEUP_DOMAIN_CHIPS):
            raise ValueError(f"a pp shape spans whole {SCALEUP_DOMAIN_CHIPS}-chip nodes, more than one; "
                             f"got {chips} chips")
        obj = super().__new__(cls, chips)
        obj.kind = kind
        obj.pp = chips // SCALEUP_DOMAIN_CHIPS if kind == PP else 1
        return obj

    @property
    def chips(self) -> int:
        return int(self)

    @property
    def label(self) -> str:
        if self.kind == PP:
            return f"{self.chips}-pp{self.pp}"
        return f"{self.chips}-dep" if self.kind == DEP else str(self.chips)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Shape):
            return int(self) == int(other) and self.kind == other.kind
        if isinstance(other, int):
            return self.kind == TP and int(self) == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(int(self)) if self.kind == TP else hash((int(self), self.kind))

    def __str__(self) -> str:
        return str(int(self))

    def __format__(self, spec: str) -> str:
        return self.label if not spec else format(int(self), spec)

    def __repr__(self) -> str:
        return f"Shape({int(self)}, {self.kind!r})"

    def __reduce__(self):
        return (Shape, (int(self), self.kind))

    def __deepcopy__(self, memo: dict) -> Shape:
        return self

    def __copy__(self) -> Shape:
        return self


def is_moe(model: ModelConfig) -> bool:
    """Whether ``model`` is a mixture of experts (fewer active than total parameters), as
    :attr:`InstanceModel.is_moe <placer.perfmodel.InstanceModel.is_moe>` reads it."""
    return model.active_fraction < 1.0


def why_not(model: ModelConfig, chips: int, kind: str) -> str | None:
    """Why ``kind`` is not admissible for ``chips`` chips of ``model`` (None when it is)."""
    if kind == PP:
        if is_moe(model):
            return "pp shapes are for dense models (an MoE instance spans nodes expert parallel)"
        if chips <= SCALEUP_DOMAIN_CHIPS or chips % SCALEUP_DOMAIN_CHIPS:
            return f"a pp shape needs whole {SCALEUP_DOMAIN_CHIPS}-chip nodes, more than one"
    if kind == DEP:
        if not is_moe(model):
            return "dep (attention data parallel × expert parallel) is for MoE models"
        if chips < 2:
            return "dep needs at least two chips"
        if not (model.moe_layers and model.experts):
            return f"dep needs the model's expert layout (moe_layers, experts), which {model.name} lacks"
    return None


def shapes_for(model: ModelConfig, chips: int, kinds: tuple[str, ...] | list[str]) -> list[Shape]:
    """The admissible shapes of ``chips`` chips of ``model`` among ``kinds``, in :data:`SHAPE_KINDS` order."""
    return [Shape(chips, k) for k in SHAPE_KINDS if k in kinds and why_not(model, chips, k) is None]


def shape_of(tp: int, kind: str | None) -> int:
    """The pool key element of a plan row: a :class:`Shape` when the row names its ``shape``,
    the plain ``tp`` (legacy layout) when it does not."""
    return tp if kind is None else Shape(tp, kind)


def legacy_shape(model: ModelConfig, chip: Chip, chips: int, weight_dtype: str, kv_dtype: str,
                 pipeline_parallel: bool = False) -> Shape:
    """The shape of the layout placer used before shapes (plan rows without ``shape``, ``placer
    estimate`` without ``--shape``): dense — ``pp`` where ``pipeline_parallel`` made stages
    (:func:`~placer.perfmodel.pipeline_stages`), else ``tp``; MoE — ``dep`` where a replica of the
    non-expert weights fits on every chip, else ``tp``."""
    if is_moe(model):
        dep = DEPModel(chip, chips, model, weight_dtype, kv_dtype)
        return Shape(chips, DEP if why_not(model, chips, DEP) is None and dep.kv_capacity_bytes > 0 else TP)
    return Shape(chips, PP if pipeline_stages(model, chips, pipeline_parallel) > 1 else TP)


def kind_of(tp: int) -> str | None:
    """The ``shape`` a plan row writes for a pool key element (None: a plain ``int``, the legacy layout)."""
    return tp.kind if isinstance(tp, Shape) else None


def kv_copies(model: ModelConfig, tp: int) -> int:
    """Copies of each token's KV a tensor-parallel attention group of ``tp`` chips holds.

    Heads are split over the chips; a chip needs the KV heads of its query heads, so with fewer KV
    heads than chips each KV head is replicated on tp / kv_heads chips (vLLM's DeepSeek / Llama
    attention: ``num_kv_heads = max(1, total_kv_heads // tp_size)`` per rank, "replicate the KV heads
    across multiple tensor parallel GPUs"). MLA's latent KV is one head shared by all query heads,
    so every chip holds all of it: ``tp`` copies (SGLang, "DP, DPA and SGLang DP Router": DeepSeek
    "only [has] one KV head. If we use tensor parallelism on 8 GPUs, it will lead to duplicated KV
    cache"; docs.sglang.io/docs/advanced_features/dp_dpa_smg_guide)."""
    if model.attn == "mla":
        return tp
    heads = max(model.kv_heads, 1)
    return max(1, tp // heads)


class TPAttentionMoEModel(InstanceModel):
    """An MoE instance with tensor-parallel attention and expert-parallel experts (shape ``tp``).

    Rules (``tp`` = chips, c = :func:`kv_copies`):

    * weights: every weight held once — attention and dense layers sharded over the chips by heads /
      columns, the routed experts split over the chips (EP): weight bytes = params × bytes/param.
    * KV: each chip holds its query heads' KV; with MLA (one latent head) that is every token's
      whole KV, so the instance holds c copies: capacity in tokens = (tp × usable HBM − weights)
      / (c × KV bytes/token).
    * decode attention: FLOPs split over the chips by heads (the base model's pooled rate), but every
      chip reads its copy of the KV: KV bytes read per step × c over the pooled bandwidth.
    * communication: the base model's expert all-to-all, plus one ring all-reduce of the attention
      output per layer (T × hidden × bf16; NCCL's ring model, :meth:`allreduce_s`), combined with the
      compute as the base MoE model does (overlapped) — optimistic for this shape, so the comparison
      with :class:`DEPModel` never favours DEP by the communication term.
    * prefill: the base model's (FLOPs split by heads); its KV write and read are not multiplied by
      c (prefill is compute bound).
    """

    @property
    def kv_copies(self) -> int:
        return kv_copies(self.model, self.tp)

    @property
    def _replicas(self) -> int:
        return 1

    @property
    def kv_capacity_bytes(self) -> float:
        return (self.tp * self.chip.mem_bytes * USABLE_MEM_FRACTION - self.weight_bytes) / self.kv_copies

    def kv_read_bytes(self, context_tokens: float) -> float:
        return super().kv_read_bytes(context_tokens) * self.kv_copies

    def comm_s(self, tokens: float, prefill: bool = False) -> float:
        if self.tp == 1:
            return 0.0
        attention_out = self.model.layers * self.allreduce_s(tokens * self.model.hidden * 2)
        return super().comm_s(tokens, prefill) + attention_out


class DEPModel(InstanceModel):
    """An MoE instance with attention data parallel × experts expert parallel over all ``tp`` chips
    (shape ``dep``).

    Rules, per chip (N = ``tp``):

    * weights: attention and the dense (non-expert) layers replicated on every chip, the routed
      experts split N ways: per-chip bytes = (dense + experts / N) × bytes/param (SGLang, "DP, DPA
      and SGLang DP Router": with DP attention each rank runs attention for its own requests with its
      own KV cache; DeepSeek-V3 technical report, arXiv 2412.19437 §3.4: decoding runs the attention
      data parallel (TP4 × DP80 with SP) and the MoE part EP320; TRT-LLM / Dynamo
      ``--enable-attention-dp``: "each [DP rank] with its own KV cache").
    * KV: each chip holds the KV of its own sequences only, once: instance capacity = N × (usable
      HBM − per-chip weights); one request's context must fit on one chip (:meth:`fits`).
    * attention: each chip runs its own B/N sequences' attention over its own KV: FLOPs and KV bytes
      divided over the N chips (the base model's pooled rates, no copy).
    * GEMMs of the dense part: each chip over its own rows (g(M) at M / N); experts: tokens dispatched
      and combined by the base model's all-to-all (DeepEP, low-latency kernels in decode), overlapped
      with compute by two micro-batches (SGLang's two-batch overlap, lmsys.org 2025-05-05).

    Not modelled: imbalance between the DP ranks' batches (the router spreads sequences evenly), and
    a lone prompt's prefill on an idle instance, which runs its attention and dense layers on its own
    rank only: prefill is costed at the pooled rate, as when the ranks' prefill batches are full.
    """

    @property
    def _replicas(self) -> int:
        return self.tp

    def fits(self, context_tokens: int) -> bool:
        per_chip = self.kv_capacity_bytes / self.tp
        return per_chip > 0 and per_chip / self.kv_bytes_per_token >= context_tokens


def shape_model(shape: Shape, chip: Chip, model: ModelConfig, weight_dtype: str, kv_dtype: str,
                prefill_chunk_tokens: int = 8192, mtp_accept: float = 1.0) -> InstanceModel:
    """The roofline performance model of one instance of ``shape`` (``dep``: :class:`DEPModel`; MoE
    ``tp``: :class:`TPAttentionMoEModel`; dense ``tp``/``pp``: :class:`InstanceModel` in ``pp`` stages)."""
    args = (chip, shape.chips, model, weight_dtype, kv_dtype, prefill_chunk_tokens, mtp_accept)
    if shape.kind == DEP:
        return DEPModel(*args)
    if shape.kind == TP and is_moe(model):
        return TPAttentionMoEModel(*args)
    return InstanceModel(*args, pp=shape.pp)


def stage_label(shape: int) -> str:
    """How a plan row's chips are laid out, in words (for readable output)."""
    if not isinstance(shape, Shape):
        return f"tp{shape}"
    if shape.kind == PP:
        return f"tp{shape.chips // shape.pp} × pp{shape.pp}"
    if shape.kind == DEP:
        return f"attention-dp{shape.chips} × ep{shape.chips}"
    return f"tp{shape.chips}"


__all__ = ["DEP", "PP", "SHAPE_KINDS", "TP", "ShapeKind", "DEPModel", "Shape", "TPAttentionMoEModel", "is_moe", "kind_of", "kv_copies", "legacy_shape",
           "shape_model", "shape_of", "shapes_for", "stage_label", "why_not"]
