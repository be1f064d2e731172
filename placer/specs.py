"""Scenario specs: the validated inputs of every placer function (docs/contracts.md YAML).

in:  a YAML/JSON file or a mapping
out: :class:`Scenario` (pydantic, validated once); ``load_scenario`` turns every
     validation failure into an :class:`~placer.errors.InputError` whose message names
     the field path and the bad value.

Help text lives on each ``Field`` so CLI help, OpenAPI docs and the scenario
reference (docs/scenario.md) come from one place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError, field_validator, model_validator

from placer.errors import InputError
from placer.fields import MAX_CHIPS, MAX_RPS, MAX_SECONDS, MAX_TOKENS, Name, count, real
from placer.readers import load_data
from placer.scenario_options import OptionsSpec

Share = real(gt=0, le=1)
Fraction = real(ge=0, le=1)
Efficiency = real(gt=0, le=1)
Tokens = count(ge=1, le=MAX_TOKENS)

#: Serving engines whose measured kernels the performance model can use (``roofline``: none, the
#: datasheet peaks × efficiencies); ``name==version`` pins a measured version (placer.kernels).
ENGINES = ("roofline", "sglang", "vllm", "trtllm")
ENGINE_HELP = ("Serving engine the plan's numbers assume: 'roofline' (datasheet peaks × efficiencies, engine-blind), "
               "or 'sglang', 'vllm', 'trtllm' (the engine's measured kernels where they cover the chip, optionally "
               "pinned as 'vllm==0.24.0'; other chips fall back as each prediction's source says).")
Engine = Annotated[str, Strict(), Field(pattern=r"^(roofline|sglang|vllm|trtllm)(==[0-9A-Za-z][0-9A-Za-z.+_-]{0,39})?$")]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChipSpec(_Spec):
    """A chip added to or overriding the bundled catalog."""

    name: Name = Field(description="Chip name used in inventories.")
    base: Name | None = Field(None, description="Catalog chip to start from; the other fields override it.")
    bf16_tflops: real(gt=0, le=1e5) | None = Field(None, description="Dense bf16 peak, TFLOP/s per chip.")
    fp8_tflops: real(gt=0, le=1e5) | None = Field(None, description="Dense fp8 peak, TFLOP/s per chip.")
    fp4_tflops: real(gt=0, le=1e5) | None = Field(
        None, description="Dense fp4 (NVFP4) peak, TFLOP/s per chip; none: no fp4.")
    mem_gb: real(gt=0, le=1e5) | None = Field(None, description="HBM capacity per chip, GB.")
    mem_bw_tbps: real(gt=0, le=1e3) | None = Field(None, description="HBM bandwidth per chip, TB/s.")
    scaleup_gbps_bidir: real(gt=0, le=1e5) | None = Field(
        None, description="Scale-up (NVLink-class) GB/s, bidirectional.")
    nic_gbit: real(gt=0, le=1e5) | None = Field(None, description="RDMA NIC Gbit/s per chip.")
    tdp_w: real(gt=0, le=1e5) | None = Field(None, description="Power per chip, W.")
    price_usd_per_h: real(gt=0, le=1e4) | None = Field(
        None, description="Rental or amortised price, USD per chip-hour.")
    compute_efficiency: Efficiency | None = Field(None, description="Sustained / peak compute.")
    mem_bw_efficiency: Efficiency | None = Field(None, description="Sustained / peak HBM bandwidth.")
    interconnect_efficiency: Efficiency | None = Field(None, description="Sustained / peak links.")

    @model_validator(mode="after")
    def _check(self) -> ChipSpec:
        if self.base is None:
            missing = [f for f in ("bf16_tflops", "mem_gb", "mem_bw_tbps", "price_usd_per_h") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"chip {self.name!r} has no 'base', so it needs {', '.join(missing)}")
        return self


class ModelSpec(_Spec):
    """A model given inline instead of by catalog name."""

    name: Name
    attn: Literal["gqa", "mla"]
    layers: count(ge=1, le=10_000)
    hidden: count(ge=1, le=1_000_000)
    q_heads: count(ge=1, le=100_000)
    kv_heads: count(le=100_000) = 0
    head_dim: count(ge=1, le=100_000) = 128
    kv_lora_rank: count(le=1_000_000) = 0
    rope_dim: count(le=100_000) = 0
    params_total_b: real(gt=0, le=1e5) = Field(description="Total parameters, billions.")
    params_active_b: real(gt=0, le=1e5) = Field(description="Parameters active per token, billions (MoE < total).")
    extra_kv_bytes_per_layer_fp8: count(le=10**9) = 0
    sparse_topk_tokens: count(le=MAX_TOKENS) = 0
    indexer_heads: count(le=100_000) = 0
    indexer_head_dim: count(le=100_000) = 0

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
    name: Name = Field(description="Datacenter name.")
    inventory: dict[Name, count(le=MAX_CHIPS)] = Field(
        default_factory=dict, description="Chips available, by chip name.")
    power_kw: real(gt=0, le=1e7) | None = Field(None, description="Power limit of the chips in this datacenter, kW.")


class LinkSpec(_Spec):
    src: Name = Field(description="Datacenter at one end.")
    dst: Name = Field(description="Datacenter at the other end (both directions are usable).")
    gbit_per_s: real(ge=0, le=1e6) = Field(description="Line rate each way, Gbit/s.")
    rtt_ms: real(ge=0, le=10_000) = Field(description="Round-trip time, ms.")
    jitter_ms: real(ge=0, le=10_000) = Field(
        0.0, description="Standard deviation of one-way delay, ms (simulator, executor).")

    @model_validator(mode="after")
    def _check(self) -> LinkSpec:
        if self.src == self.dst:
            raise ValueError(f"link from {self.src!r} to itself: src and dst must differ")
        return self


class RequestClass(_Spec):
    name: Name = Field(description="Class name, used in routes.")
    share: Share = Field(description="Fraction of requests in this class.")
    input_tokens: Tokens = Field(description="Prompt length including the cached prefix, tokens.")
    output_tokens: Tokens = Field(description="Generated tokens.")
    hit_rate: Fraction = Field(description="Fraction of the prompt found in the prefix cache.")
    new_tokens_cv2: real(ge=0, le=1e4) = Field(
        0.0, description="Spread of the class's uncached prompt tokens: variance / mean² (0: every request alike). "
        "`workload fit` and `trace:` keep it; the P queue's wait prices it (E[S²] beyond the mean's square); drawn "
        "behind the class's cached prefix (the new tokens spread, the prefix stays).")
    output_tokens_cv2: real(ge=0, le=1e4) = Field(
        0.0, description="Spread of the class's output tokens: variance / mean² (0: every request alike).")


class WorkloadSpec(_Spec):
    arrival_rps: real(gt=0, le=MAX_RPS) = Field(description="Offered load, requests per second.")
    arrival_cv2: real(gt=0, le=100) = Field(
        1.0, description="Variability of the arrivals: the squared coefficient of variation of the times between "
        "requests (1: Poisson; below 1 more regular than Poisson, as turns that each follow their predecessor's answer; "
        "above 1 burstier). Measured from a trace by `placer workload fit` (the gaps, or the counts per bin of a binned "
        "trace); the simulator draws the class workload's arrivals as a renewal process with it; the MILP's, evaluate's "
        "and validate's P queues take it as a G/G/1 law (placer.queueing.gg1_wait_factor).")
    classes: list[RequestClass] | None = Field(None, description="Request classes (shares sum to 1).")
    trace: str | None = Field(None, description="JSON Lines trace, bucketed into classes when classes are absent.")
    prefix_cache_tokens: count(ge=1, le=10**13) | None = Field(
        None, description="Prefix cache (P side) a trace's `hash_ids` hits are counted under, tokens: an LRU of this "
        "size in 512-token blocks (a finite cache evicts, so hits fall below the trace's ideal). None: the "
        "unbounded cache, the ideal (an upper bound).")

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
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
    ttft_p90_s: real(gt=0, le=MAX_SECONDS) = Field(description="90th-percentile time to first token, s.")
    tpot_s: real(gt=0, le=60) = Field(description="Time per output token (decode step), s.")


KvDtype = Literal["bf16", "fp8", "int8", "fp4"]
WeightDtype = Literal["bf16", "fp8", "int8", "int4", "fp4"]
KV_DTYPE_HELP = "KV cache element type (fp4: NVFP4, only on chips with an fp4 rate)."
WEIGHT_DTYPE_HELP = ("Weight type (model's native by default): int8/int4 weight-only (bf16 GEMMs), fp4 NVFP4 "
                     "(only on chips with an fp4 rate).")
#: What a single-model scenario gives at its top level and a fleet gives per model instead.
PER_MODEL_FIELDS = ("model", "kv_dtype", "weight_dtype", "workload", "sla")


class FleetModelSpec(_Spec):
    """One model of a fleet: its own workload and SLA on the scenario's shared chips, power and WAN lines."""

    name: Name = Field(description="The model's name in the plan (pools[].model, routes[].model, metrics.models).")
    model: str | ModelSpec = Field(description="Catalog model name, or an inline model config.")
    kv_dtype: KvDtype = Field("bf16", description=KV_DTYPE_HELP)
    weight_dtype: WeightDtype | None = Field(None, description=WEIGHT_DTYPE_HELP)
    workload: WorkloadSpec = Field(description="This model's offered load and request classes (or a trace).")
    sla: SlaSpec = Field(description="This model's service-level objectives.")


class Scenario(_Spec):
    """A whole planning problem: hardware, links, model, workload, SLA, options.

    A fleet gives ``models`` (each with its own model, dtypes, workload and SLA) instead of the
    top-level ``model``/``kv_dtype``/``weight_dtype``/``workload``/``sla``; chips, datacenters,
    power, links and options are shared by all its models."""

    name: Name = Field(description="Scenario name, carried into plans.")
    model: str | ModelSpec | None = Field(
        None, description="Catalog model name, or an inline model config (required unless `models` is given).")
    kv_dtype: KvDtype = Field("bf16", description=KV_DTYPE_HELP)
    weight_dtype: WeightDtype | None = Field(None, description=WEIGHT_DTYPE_HELP)
    models: list[FleetModelSpec] | None = Field(None, description=(
        "A fleet: several models served over the same datacenters, chips, power and WAN lines, each with "
        "its own workload and SLA, planned jointly (every pool serves one model; BCR per model and for the "
        "fleet). Replaces the top-level model, kv_dtype, weight_dtype, workload and sla."))
    chips: list[ChipSpec] = Field(default_factory=list, description="Chip additions or overrides.")
    datacenters: list[DatacenterSpec] = Field(min_length=1, description="Datacenters with chip inventories.")
    links: list[LinkSpec] = Field(default_factory=list, description="WAN lines between datacenters.")
    workload: WorkloadSpec | None = Field(
        None, description="Offered load and its request classes (or a trace); required unless `models` is given.")
    sla: SlaSpec | None = Field(None, description=(
        "Service-level objectives a request must meet to count as goodput; required unless `models` is given."))
    options: OptionsSpec = Field(default_factory=OptionsSpec, description="Planner options (all optional).")
    engine: Engine = Field("roofline", description=ENGINE_HELP)
    profiles: list[Annotated[str, Strict(), Field(min_length=1, max_length=4096)]] = Field(
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
    def _one_model_or_fleet(self) -> Scenario:
        """Either the single model's fields or a non-empty ``models`` list with distinct names, not both."""
        if self.models is None:
            missing = [f for f in ("model", "workload", "sla") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"scenario needs {', '.join(repr(f) for f in missing)} (or a 'models' list)")
            return self
        if not self.models:
            raise ValueError("models: the list is empty; give at least one model, or drop 'models'")
        both = [f for f in PER_MODEL_FIELDS if f in self.model_fields_set]
        if both:
            raise ValueError(f"models: a fleet gives {', '.join(both)} per model, not at the top level")
        names = [m.name for m in self.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"models: duplicate model names: {', '.join(dupes)}")
        return self

    @property
    def is_fleet(self) -> bool:
        return self.models is not None

    def single_model(self, command: str) -> Scenario:
        """This scenario, or InputError when it is a fleet (``command`` takes one model)."""
        if self.is_fleet:
            raise InputError(f"models: scenario {self.name!r} is a fleet of {len(self.models)} models; {command} takes "
                             "one model (plan the fleet with placer optimize / evaluate)")
        return self

    def member(self, i: int) -> Scenario:
        """The single-model scenario of ``models[i]`` on this scenario's shared hardware and options."""
        m = self.models[i]
        return self.model_copy(update={"models": None, **{f: getattr(m, f) for f in PER_MODEL_FIELDS}})

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


def _shown(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 10 MB string must not become the message)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _format_validation_error(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"] if not str(x).startswith("function-"))
        msg = e["msg"].removeprefix("Value error, ")
        value = e.get("input")
        shown = "" if isinstance(value, (dict, list)) or value is None else f" (got {_shown(value)})"
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


def _relative_trace(path: Path, workload: WorkloadSpec) -> WorkloadSpec:
    """The workload with its trace path made absolute, relative to the scenario file."""
    if workload.trace and not Path(workload.trace).is_absolute():
        return workload.model_copy(update={"trace": str((path.parent / workload.trace).resolve())})
    return workload


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (YAML, or JSON by extension)."""
    path = Path(path)
    data = load_data(path, "scenario file")
    try:
        scenario = parse_scenario(data)
    except InputError as err:
        raise InputError(f"{path}: {err}") from None
    if scenario.models is not None:
        models = [m.model_copy(update={"workload": _relative_trace(path, m.workload)}) for m in scenario.models]
        scenario = scenario.model_copy(update={"models": models})
    else:
        scenario = scenario.model_copy(update={"workload": _relative_trace(path, scenario.workload)})
    if scenario.profiles:
        from placer.profiles.records import LATEST  # here: the executor loads specs, not placer.profiles

        profiles = [p if p == LATEST or Path(p).is_absolute() else str((path.parent / p).resolve())
                    for p in scenario.profiles]
        scenario = scenario.model_copy(update={"profiles": profiles})
    return scenario
