"""Scenario specs: the validated inputs of every placer function (docs/contracts.md YAML).

in:  a YAML/JSON file or a mapping
out: :class:`Scenario` (pydantic, validated once); ``load_scenario`` turns every
     validation failure into an :class:`~placer.errors.InputError` whose message names
     the field path and the bad value.

Help text lives on each ``Field`` so CLI help, OpenAPI docs and the scenario
reference (docs/scenario.md) come from one place.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from placer.errors import InputError
from placer.flows import DEFAULT_CATCH_UP_THRESHOLD_TOKENS, DEFAULT_FILTER


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _finite(value: float, name: str) -> float:
    if value is not None and (math.isnan(value) or math.isinf(value)):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


class ChipSpec(_Spec):
    """A chip added to or overriding the bundled catalog."""

    name: str = Field(description="Chip name used in inventories.")
    base: str | None = Field(None, description="Catalog chip to start from; the other fields override it.")
    bf16_tflops: float | None = Field(None, gt=0, description="Dense bf16 peak, TFLOP/s per chip.")
    fp8_tflops: float | None = Field(None, gt=0, description="Dense fp8 peak, TFLOP/s per chip.")
    fp4_tflops: float | None = Field(None, gt=0, description="Dense fp4 (NVFP4) peak, TFLOP/s per chip; none: no fp4.")
    mem_gb: float | None = Field(None, gt=0, description="HBM capacity per chip, GB.")
    mem_bw_tbps: float | None = Field(None, gt=0, description="HBM bandwidth per chip, TB/s.")
    scaleup_gbps_bidir: float | None = Field(None, gt=0, description="Scale-up (NVLink-class) GB/s, bidirectional.")
    nic_gbit: float | None = Field(None, gt=0, description="RDMA NIC Gbit/s per chip.")
    tdp_w: float | None = Field(None, gt=0, description="Power per chip, W.")
    price_usd_per_h: float | None = Field(None, gt=0, description="Rental or amortised price, USD per chip-hour.")
    compute_efficiency: float | None = Field(None, gt=0, le=1, description="Sustained / peak compute.")
    mem_bw_efficiency: float | None = Field(None, gt=0, le=1, description="Sustained / peak HBM bandwidth.")
    interconnect_efficiency: float | None = Field(None, gt=0, le=1, description="Sustained / peak links.")

    @model_validator(mode="after")
    def _check(self) -> ChipSpec:
        for name, value in self:
            if isinstance(value, float):
                _finite(value, name)
        if self.base is None:
            missing = [f for f in ("bf16_tflops", "mem_gb", "mem_bw_tbps", "price_usd_per_h") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"chip {self.name!r} has no 'base', so it needs {', '.join(missing)}")
        return self


class ModelSpec(_Spec):
    """A model given inline instead of by catalog name."""

    name: str
    attn: Literal["gqa", "mla"]
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    q_heads: int = Field(gt=0)
    kv_heads: int = Field(0, ge=0)
    head_dim: int = Field(128, gt=0)
    kv_lora_rank: int = Field(0, ge=0)
    rope_dim: int = Field(0, ge=0)
    params_total_b: float = Field(gt=0, description="Total parameters, billions.")
    params_active_b: float = Field(gt=0, description="Parameters active per token, billions (MoE < total).")
    extra_kv_bytes_per_layer_fp8: int = Field(0, ge=0)
    sparse_topk_tokens: int = Field(0, ge=0)
    indexer_heads: int = Field(0, ge=0)
    indexer_head_dim: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.attn == "gqa" and self.kv_heads <= 0:
            raise ValueError(f"model {self.name!r}: gqa attention needs kv_heads > 0")
        if self.attn == "mla" and self.kv_lora_rank <= 0:
            raise ValueError(f"model {self.name!r}: mla attention needs kv_lora_rank > 0")
        if self.params_active_b > self.params_total_b:
            raise ValueError(
                f"params_active_b ({self.params_active_b}) exceeds params_total_b ({self.params_total_b})"
            )
        return self


class DatacenterSpec(_Spec):
    name: str = Field(description="Datacenter name.")
    inventory: dict[str, int] = Field(default_factory=dict, description="Chips available, by chip name.")
    power_kw: float | None = Field(None, gt=0, description="Power limit of the chips in this datacenter, kW.")

    @field_validator("inventory")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        for chip, count in value.items():
            if count < 0:
                raise ValueError(f"inventory of {chip!r} must be >= 0, got {count}")
        return value


class LinkSpec(_Spec):
    src: str = Field(description="Datacenter at one end.")
    dst: str = Field(description="Datacenter at the other end (both directions are usable).")
    gbit_per_s: float = Field(ge=0, description="Line rate each way, Gbit/s.")
    rtt_ms: float = Field(ge=0, description="Round-trip time, ms.")
    jitter_ms: float = Field(0.0, ge=0, description="Standard deviation of one-way delay, ms (simulator, executor).")

    @model_validator(mode="after")
    def _check(self) -> LinkSpec:
        _finite(self.gbit_per_s, "gbit_per_s")
        _finite(self.rtt_ms, "rtt_ms")
        if self.src == self.dst:
            raise ValueError(f"link from {self.src!r} to itself: src and dst must differ")
        return self


class RequestClass(_Spec):
    name: str = Field(description="Class name, used in routes.")
    share: float = Field(gt=0, le=1, description="Fraction of requests in this class.")
    input_tokens: int = Field(gt=0, description="Prompt length including the cached prefix, tokens.")
    output_tokens: int = Field(gt=0, description="Generated tokens.")
    hit_rate: float = Field(ge=0, le=1, description="Fraction of the prompt found in the prefix cache.")

    @model_validator(mode="after")
    def _check(self) -> RequestClass:
        _finite(self.share, "share")
        _finite(self.hit_rate, "hit_rate")
        return self


class WorkloadSpec(_Spec):
    arrival_rps: float = Field(gt=0, description="Offered load, requests per second.")
    classes: list[RequestClass] | None = Field(None, description="Request classes (shares sum to 1).")
    trace: str | None = Field(None, description="JSON Lines trace, bucketed into classes when classes are absent.")

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        _finite(self.arrival_rps, "arrival_rps")
        if not self.classes and not self.trace:
            raise ValueError("workload needs 'classes' or 'trace'")
        if self.classes:
            names = [c.name for c in self.classes]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate request class names: {', '.join(dupes)}")
            total = sum(c.share for c in self.classes)
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"class shares must sum to 1, got {total:.6g}")
        return self


class SlaSpec(_Spec):
    ttft_p90_s: float = Field(gt=0, description="90th-percentile time to first token, s.")
    tpot_s: float = Field(gt=0, description="Time per output token (decode step), s.")


class OptionsSpec(_Spec):
    tp_degrees: list[int] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32],
        description="Chips per instance to consider (tensor/expert parallel).",
    )
    drc: bool = Field(True, description="Decode-side radix cache: only uncached KV crosses the WAN.")
    filter: bool = Field(True, description="Allow the anomalous-traffic filter (P-RLD) for qualifying classes.")
    filter_max_output_tokens: int = Field(
        DEFAULT_FILTER.max_output_tokens, gt=0, description="Filter: output shorter than this, tokens."
    )
    filter_max_hit_rate: float = Field(
        DEFAULT_FILTER.max_hit_rate, ge=0, le=1, description="Filter: hit rate below this."
    )
    filter_min_input_tokens: int = Field(
        DEFAULT_FILTER.min_input_tokens, gt=0, description="Filter: input at least this long, tokens."
    )
    utilization_cap: float = Field(0.8, gt=0, lt=1, description="Planned busy fraction of P, RLD and MD pools.")
    link_utilization_cap: float = Field(0.85, gt=0, le=1, description="Planned fraction of each WAN line used.")
    catch_up_threshold_tokens: int = Field(
        DEFAULT_CATCH_UP_THRESHOLD_TOKENS, gt=0,
        description="Handoff: above this many pending RLD tokens use catch-up, else one-shot.",
    )
    budget_usd_per_h: float | None = Field(None, gt=0, description="Budget for --objective max-goodput, USD/h.")
    min_served_fraction: float = Field(
        1.0, ge=0, le=1,
        description="Fraction of the offered load a bcr/max-goodput plan must carry; below 1 lets the "
        "BCR objective leave load that does not pay unserved.",
    )
    prefill_chunk_tokens: int = Field(8192, gt=0, description="Chunked-prefill chunk size, tokens.")
    max_instances_per_pool: int = Field(256, gt=0, description="Upper bound on instances of one pool.")
    pipeline_parallel: bool = Field(
        False, description="Instances larger than one 8-chip node of a dense model run one pipeline stage per "
        "node (tp 8 × pp tp/8: the pipeline bubble and the activations' hop between nodes modelled) instead "
        "of tensor parallel across nodes; plan pools carry `pp`.")
    aggregated: bool = Field(
        False, description="Also consider aggregated pools (role A: prefill chunks mixed into decode steps on one "
        "instance) beside P/RLD/MD in the same MILP; the plan may mix them. `placer compare` shows the "
        "all-aggregated baseline (`agg`) either way.")
    agg_chunk_tokens: list[int] | None = Field(
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

    @field_validator("tp_degrees")
    @classmethod
    def _tp(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("tp_degrees must not be empty")
        for tp in value:
            if tp < 1 or tp > 64:
                raise ValueError(f"tp degree must be in 1..64, got {tp}")
        return sorted(set(value))


class Scenario(_Spec):
    """A whole planning problem: hardware, links, model, workload, SLA, options."""

    name: str = Field(description="Scenario name, carried into plans.")
    model: str | ModelSpec = Field(description="Catalog model name, or an inline model config.")
    kv_dtype: Literal["bf16", "fp8", "int8", "fp4"] = Field(
        "bf16", description="KV cache element type (fp4: NVFP4, only on chips with an fp4 rate).")
    weight_dtype: Literal["bf16", "fp8", "int8", "int4", "fp4"] | None = Field(None, description=(
        "Weight type (model's native by default): int8/int4 weight-only (bf16 GEMMs), fp4 NVFP4 "
        "(only on chips with an fp4 rate)."))
    chips: list[ChipSpec] = Field(default_factory=list, description="Chip additions or overrides.")
    datacenters: list[DatacenterSpec] = Field(min_length=1, description="Datacenters with chip inventories.")
    links: list[LinkSpec] = Field(default_factory=list, description="WAN lines between datacenters.")
    workload: WorkloadSpec = Field(description="Offered load and its request classes (or a trace).")
    sla: SlaSpec = Field(description="Service-level objectives a request must meet to count as goodput.")
    options: OptionsSpec = Field(default_factory=OptionsSpec, description="Planner options (all optional).")
    profiles: list[str] = Field(
        default_factory=list,
        description="Measured profiles to plan with: a profile JSON (`placer profile chip` / `placer profile "
        "model`), a CSV of measured latencies (docs/profiles.md), a directory of them, or 'latest' (the "
        "service database). One path or a list; relative paths are relative to the scenario file. "
        "`--profiles` on the command line replaces this list.")

    @field_validator("profiles", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _cross_refs(self) -> Scenario:
        names = [dc.name for dc in self.datacenters]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate datacenter names: {', '.join(dupes)}")
        for i, link in enumerate(self.links):
            for end in ("src", "dst"):
                dc = getattr(link, end)
                if dc not in names:
                    raise ValueError(f"links[{i}].{end}: unknown datacenter {dc!r}; datacenters: {', '.join(names)}")
        pairs = [frozenset((link.src, link.dst)) for link in self.links]
        if len(set(pairs)) != len(pairs):
            raise ValueError("two links join the same pair of datacenters; give one link per pair")
        if sum(sum(dc.inventory.values()) for dc in self.datacenters) == 0:
            raise ValueError("every datacenter inventory is empty: there are no chips to place")
        return self


def _format_validation_error(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"] if not str(x).startswith("function-"))
        msg = e["msg"].removeprefix("Value error, ")
        value = e.get("input")
        shown = "" if isinstance(value, (dict, list)) or value is None else f" (got {value!r})"
        parts.append(f"{loc or 'scenario'}: {msg}{shown}")
    return "; ".join(parts)


def parse_scenario(data: Any) -> Scenario:
    """Validate a mapping into a :class:`Scenario`, raising :class:`InputError`."""
    if not isinstance(data, dict):
        raise InputError(f"scenario must be a mapping, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise InputError(f"invalid scenario: {_format_validation_error(err)}") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (YAML, or JSON by extension)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise InputError(f"cannot read scenario file {str(path)!r}: {err.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise InputError(f"scenario file {str(path)!r} is not valid {kind}: {err}") from None
    scenario = parse_scenario(data)
    if scenario.workload.trace and not Path(scenario.workload.trace).is_absolute():
        trace = (path.parent / scenario.workload.trace).resolve()
        workload = scenario.workload.model_copy(update={"trace": str(trace)})
        scenario = scenario.model_copy(update={"workload": workload})
    if scenario.profiles:
        from placer.profiles.records import LATEST  # here: the executor loads specs, not placer.profiles

        profiles = [p if p == LATEST or Path(p).is_absolute() else str((path.parent / p).resolve())
                    for p in scenario.profiles]
        scenario = scenario.model_copy(update={"profiles": profiles})
    return scenario
