"""A scenario's ``options:`` section: what the planner weighs and the caps it plans under.

in:  the ``options`` mapping of a scenario (docs/contracts.md YAML), validated by :class:`placer.specs.Scenario`
out: :class:`OptionsSpec` (pydantic, frozen): tp degrees and instance shapes, the radix cache and the filter,
     utilisation caps, the handoff's catch-up threshold, budget and served fraction, aggregated pools

Help text lives on each ``Field`` (the CLI, OpenAPI and docs/scenario.md read it); :mod:`placer.specs`
re-exports the class beside the other sections.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

from placer.fields import MAX_TOKENS, count, real
from placer.pdd import DEFAULT_CATCH_UP_THRESHOLD_TOKENS, DEFAULT_FILTER
from placer.shapes import PP, SHAPE_KINDS, ShapeKind

Fraction = real(ge=0, le=1)
Tokens = count(ge=1, le=MAX_TOKENS)


class OptionsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tp_degrees: list[count(ge=1, le=64)] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32],
        description="Chips per instance to consider (tensor/expert parallel).",
    )
    drc: Annotated[bool, Strict()] = Field(True, description="Decode-side radix cache: only uncached KV crosses the WAN.")
    filter: Annotated[bool, Strict()] = Field(True, description="Allow the anomalous-traffic filter (P-RLD) for qualifying classes.")
    filter_max_output_tokens: Tokens = Field(
        DEFAULT_FILTER.max_output_tokens, description="Filter: output shorter than this, tokens."
    )
    filter_max_hit_rate: Fraction = Field(DEFAULT_FILTER.max_hit_rate, description="Filter: hit rate below this.")
    filter_min_input_tokens: Tokens = Field(
        DEFAULT_FILTER.min_input_tokens, description="Filter: input at least this long, tokens."
    )
    utilization_cap: real(ge=0.01, lt=1) = Field(
        0.8, description="Planned busy fraction of P, RLD and MD pools.")
    link_utilization_cap: real(ge=0.01, le=1) = Field(
        0.85, description="Planned fraction of each WAN line used.")
    catch_up_threshold_tokens: Tokens = Field(
        DEFAULT_CATCH_UP_THRESHOLD_TOKENS,
        description="Handoff: above this many pending RLD tokens use catch-up, else one-shot.",
    )
    budget_usd_per_h: real(gt=0, le=1e9) | None = Field(
        None, description="Budget for --objective max-goodput, USD/h.")
    min_served_fraction: Fraction = Field(
        1.0,
        description="Fraction of the offered load a bcr/max-goodput plan must carry; below 1 lets the "
        "BCR objective leave load that does not pay unserved.",
    )
    prefill_chunk_tokens: Tokens = Field(8192, description="Chunked-prefill chunk size, tokens.")
    max_instances_per_pool: count(ge=1, le=100_000) = Field(256, description="Upper bound on instances of one pool.")
    instance_shapes: list[ShapeKind] | None = Field(
        None, description="Instance shapes the planner weighs, each where admissible, as separate candidate "
        "pools of the same chips (placer.shapes): `tp` (all chips one tensor-parallel group; MoE: attention TP "
        "× experts EP), `pp` (dense, more than one 8-chip node: tp 8 per node × pp stages, the bubble and the "
        "inter-stage hop modelled), `dep` (MoE: attention data parallel × expert parallel over all chips). "
        "Default: all three. Plan pools carry `shape` (and `pp`).")
    pipeline_parallel: Annotated[bool, Strict()] = Field(
        False, description="Deprecated: use instance_shapes. true = as before, a dense instance on more than one "
        "8-chip node runs tp 8 × pp stages in place of tp (instance_shapes [tp, pp, dep] with pp forced where "
        "admissible); false = instance_shapes [tp, dep]. Not together with instance_shapes.")
    aggregated: Annotated[bool, Strict()] = Field(
        False, description="Also consider aggregated pools (role A: prefill chunks mixed into decode steps on one "
        "instance) beside P/RLD/MD in the same MILP; the plan may mix them. `placer compare` shows the "
        "all-aggregated baseline (`agg`) either way.")
    agg_chunk_tokens: list[count(ge=1, le=MAX_TOKENS)] | None = Field(
        None, description="Aggregated pools: prompt tokens per step (chunked-prefill budget) to consider, "
        "16..65536 (default: per chip and tp, the two largest powers of two from 64 to 8192 whose design "
        "meets the TPOT).")

    @field_validator("agg_chunk_tokens")
    @classmethod
    def _chunks(cls, value: list[int] | None) -> list[int] | None:
        bad = [c for c in value or () if not 16 <= c <= 65536]
        if value is not None and (bad or not value):
            raise ValueError(f"give chunks of 16..65536 tokens, got {bad or 'none'}")
        return None if value is None else sorted(set(value))

    @field_validator("instance_shapes")
    @classmethod
    def _shapes(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("instance_shapes must not be empty (omit it for every shape)")
        return None if value is None else [k for k in SHAPE_KINDS if k in value]

    @model_validator(mode="after")
    def _deprecated_pipeline(self) -> OptionsSpec:
        if self.instance_shapes is not None and "pipeline_parallel" in self.model_fields_set:
            raise ValueError("pipeline_parallel is deprecated and instance_shapes replaces it: give only "
                             "instance_shapes (e.g. [tp, pp, dep])")
        return self

    @property
    def shape_kinds(self) -> tuple[str, ...]:
        """The instance shapes to weigh: ``instance_shapes``, or the deprecated ``pipeline_parallel``'s mapping."""
        if self.instance_shapes is not None:
            return tuple(self.instance_shapes)
        if "pipeline_parallel" in self.model_fields_set and not self.pipeline_parallel:
            return tuple(k for k in SHAPE_KINDS if k != PP)
        return SHAPE_KINDS

    @field_validator("tp_degrees")
    @classmethod
    def _tp(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("tp_degrees must not be empty")
        return sorted(set(value))
