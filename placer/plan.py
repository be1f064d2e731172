"""Plan JSON (docs/contracts.md): what `placer optimize --json` prints and the API serves.

in:  the solver's extraction, or a user's hand-written JSON file
out: :class:`Plan` (pydantic); ``load_plan`` maps bad files to InputError.

Extensions beyond the contract (allowed: new keys only): ``metrics.served_rps``,
``metrics.offered_rps``, ``metrics.sla_attainment``, ``metrics.bcr_gap``,
``metrics.usd_per_million_input_tokens``, ``metrics.usd_per_million_cached_input_tokens``,
``metrics.usd_per_million_output_tokens`` (absent when the plan serves no such token), ``pools[].design_batch``
and ``pools[].planned_utilization``, ``assignments``
(per-pool split of each class, which `validate` re-checks) and ``notes``; SLA honesty (issue 42):
``metrics.sla_met`` and ``metrics.sla_misses``, ``verification`` (the simulated figures, the
perturbed runs) and ``robust`` (``optimize --robust``).

Instance shapes (:mod:`placer.shapes`): ``pools[].shape`` (``tp`` | ``pp`` | ``dep``) with ``pools[].pp``
for pipeline stages, and ``assignments[].shape``; a row that names a shape carries a
:class:`~placer.shapes.Shape` as its ``tp`` (an ``int``: the chip count), so every (role, dc, chip, tp)
key tells the shapes apart. Rows without ``shape`` keep the legacy layout (``pp`` alone means ``pp``).

Fleets (a scenario with ``models:``): ``pools[].model``, ``routes[].model`` and
``assignments[].model`` name the model each row serves, ``metrics`` are the fleet's and
``models`` maps each model's name to its own metrics; all absent in single-model plans.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from placer.errors import InputError
from placer.fields import MAX_RPS, MAX_TOKENS, Name, real
from placer.fields import count as bounded_int  # "count" is also a PoolOut field
from placer.readers import load_data
from placer.pdd import ADAPTIVE, DEFAULT_CATCH_UP_THRESHOLD_TOKENS, HandoffMode, PipelineName, Role
from placer.shapes import PP, Shape, ShapeKind, shape_of

SCHEMA_VERSION = 1
#: Most instances one pool row may ask for (the scenario's max_instances_per_pool is at most this).
MAX_POOL_COUNT = 100_000
Rps = real(ge=0, le=MAX_RPS)

#: A line's planned or installed Gbit/s: finite and not negative (an overloaded plan may plan more than the line).
Gbps = real(ge=0, le=1e12)

SHAPE_HELP = ("How the instance's tp chips split the model (placer.shapes): `tp` one tensor-parallel group "
              "(MoE: attention TP, experts EP), `pp` tp 8 per node × pp stages (dense), `dep` attention "
              "data parallel × expert parallel over all chips (MoE). Absent: the layout of plans written "
              "before shapes (dense TP, or pp per `pp`; MoE attention DP where the replicas fit).")


class _M(BaseModel):
    model_config = ConfigDict(extra="allow")


class PoolKey(NamedTuple):
    """What names one pool of a plan: (role, datacenter, chip, tp) — ``tp`` a
    :class:`~placer.shapes.Shape` when the row names one. Equal to (and hashed as) the plain tuple."""

    role: str
    datacenter: str
    chip: str
    tp: int


class SlaMiss(_M):
    """One request class whose planned figures miss the SLA (``request_class`` "*": the whole mix)."""

    request_class: str
    model: Name | None = Field(None, description="Fleets: the model of the class.")
    ttft_p90_s: float = Field(description="The class's planned TTFT P90, s.")
    sla_attainment: float = Field(description="Its planned share of requests within the TTFT SLA (and TPOT).")
    why: str = Field(description="What misses, in words (TTFT P90 or TPOT over the SLA).")


class Metrics(_M):
    bcr_requests_per_usd: float = Field(0.0, description="SLA goodput requests per USD = goodput_rps·3600/cost.")
    cost_usd_per_h: float = 0.0
    goodput_rps: float = Field(0.0, description="Requests per second that meet the SLA.")
    ttft_p50_s: float = 0.0
    ttft_p90_s: float = 0.0
    ttft_p99_s: float = 0.0
    tpot_s: float = 0.0
    wan_gbit_per_s: float = 0.0
    rld_token_share: float = 0.0
    served_rps: float = Field(0.0, description="Requests per second the plan carries (meeting the SLA or not).")
    offered_rps: float = Field(0.0, description="The scenario's arrival rate.")
    sla_attainment: float = Field(0.0, description="Fraction of served requests meeting TTFT and TPOT.")
    usd_per_million_input_tokens: float | None = Field(None, description=(
        "USD per million uncached prompt tokens served (placer.token_cost: prefill cost over its tokens)."))
    usd_per_million_cached_input_tokens: float | None = Field(None, description=(
        "USD per million prompt tokens found in the prefix cache (the prefill seconds their reuse costs)."))
    usd_per_million_output_tokens: float | None = Field(None, description=(
        "USD per million output tokens served (decode cost over its tokens)."))
    sla_met: bool | None = Field(None, description=(
        "Whether the planned TTFT P90 and TPOT meet the scenario's SLA (placer.slacheck); false: "
        "`placer optimize` says so first and exits 3 unless --best-effort."))
    sla_misses: list[SlaMiss] | None = Field(None, description=(
        "When ``sla_met`` is false: the request classes (or the whole mix, ``request_class`` \"*\") that miss."))


class PoolOut(_M):
    role: Role
    model: Name | None = Field(None, description="Fleets: the model this row serves (absent in single-model plans).")
    datacenter: Name
    chip: Name
    tp: bounded_int(ge=1, le=64)
    count: bounded_int(le=MAX_POOL_COUNT) = Field(description=f"Instances in the pool (0..{MAX_POOL_COUNT:,}).")
    design_batch: int | None = Field(None, ge=1, description=(
        "Decode pools: the batch the plan sizes them at (largest meeting TPOT and KV memory at the mix's context)."))
    shape: ShapeKind | None = Field(None, description=SHAPE_HELP)
    pp: int | None = Field(None, ge=2, description=(
        "Pipeline stages of each instance when more than one (shape `pp`): tp/pp chips per "
        "stage, tensor parallel inside it. A row with `pp` and no `shape` has shape `pp`."))
    planned_utilization: float | None = Field(None, ge=0, description=(
        "P pools: planned busy fraction of each instance, Σ prefill seconds × req/s ÷ instances."))

    @model_validator(mode="after")
    def _shape(self) -> PoolOut:
        """``tp`` becomes a :class:`~placer.shapes.Shape` when the row names one (or gives ``pp``)."""
        kind = self.shape or (PP if self.pp is not None else None)
        self.tp = shape_of(self.tp, kind)
        if kind is None:
            return self
        stages = self.tp.pp if self.tp.pp > 1 else None
        if self.pp is not None and self.pp != stages:
            raise ValueError(f"pp: shape {kind!r} on {int(self.tp)} chips has pp {self.tp.pp}, got {self.pp}")
        self.shape, self.pp = kind, stages
        return self

    @property
    def key(self) -> PoolKey:
        """The pool this row is: (role, datacenter, chip, tp)."""
        return PoolKey(self.role, self.datacenter, self.chip, self.tp)


class Route(_M):
    request_class: str
    model: Name | None = Field(None, description="Fleets: the model this row serves (absent in single-model plans).")
    pipeline: PipelineName
    src: str
    dst: str
    rps: Rps


class LinkUse(_M):
    src: str
    dst: str
    gbit_per_s_used: Gbps = 0.0
    gbit_per_s_capacity: Gbps = 0.0


class Assignment(_M):
    request_class: str
    model: Name | None = Field(None, description="Fleets: the model this row serves (absent in single-model plans).")
    pipeline: PipelineName | None = None
    role: Role
    datacenter: str
    chip: str
    tp: bounded_int(ge=1, le=64)
    dst: str | None = None
    rps: Rps
    queue: str | None = Field(None, description=(
        "P and A: the queue (utilisation tier/admitted classes; A: /c<chunk tokens>) it joins."))
    queue_instances: float | None = Field(None, ge=0, description="P and A: instances that serve that queue.")
    uncached_tokens: bounded_int(ge=0, le=MAX_TOKENS) | None = Field(None, description=(
        "P and A: the class's uncached prompt tokens, (1 - hit rate) x input, rounded: the executor sends a "
        "request to the 'set' queues that admit its nearest class by this length."))
    shape: ShapeKind | None = Field(None, description=(
        "The pool's instance shape (as pools[].shape); absent: the pool row's with the same role, "
        "datacenter, chip and tp when there is one such row."))

    @model_validator(mode="after")
    def _shape(self) -> Assignment:
        self.tp = shape_of(self.tp, self.shape)
        return self

    @property
    def key(self) -> PoolKey:
        """The pool this row assigns to: (role, datacenter, chip, tp)."""
        return PoolKey(self.role, self.datacenter, self.chip, self.tp)


def _adopt_pool_shapes(plan: Plan) -> None:
    """An assignment without ``shape`` joins the one pool row of its role, datacenter, chip (and
    model) and chip count; where several shapes of it exist it must name its own."""
    rows: dict[tuple, list] = {}
    for p in plan.pools:
        rows.setdefault((p.model, p.role, p.datacenter, p.chip, int(p.tp)), []).append(p.tp)
    for i, a in enumerate(plan.assignments):
        if a.shape is not None:
            continue
        shapes = rows.get((a.model, a.role, a.datacenter, a.chip, int(a.tp)), [])
        if len(set(shapes)) > 1:
            raise ValueError(f"assignments.{i}.shape: pools of {a.role} {a.chip} tp{int(a.tp)} in {a.datacenter} "
                             f"come in several shapes ({', '.join(sorted(f'tp{s}' for s in set(shapes)))}); name one")
        if shapes and isinstance(shapes[0], Shape):
            a.tp = shapes[0]


class Handoff(_M):
    mode: HandoffMode = ADAPTIVE
    catch_up_threshold_tokens: bounded_int(le=MAX_TOKENS) = DEFAULT_CATCH_UP_THRESHOLD_TOKENS


class SolverInfo(_M):
    backend: str = "none"
    status: str = "unknown"
    mip_gap: float = 0.0
    seconds: float = 0.0


class EngineInfo(_M):
    """The engine a plan's numbers assume, as CONTRACTS.md writes it: ``{"name": …, "version": …}``."""

    name: str = Field(max_length=16, pattern=r"^(roofline|sglang|vllm|trtllm)$")
    version: str | None = Field(None, max_length=40)

    @model_validator(mode="before")
    @classmethod
    def _from_spec(cls, value: object) -> object:
        """``"vllm==0.24.0"`` (the scenario's spelling) → ``{"name": "vllm", "version": "0.24.0"}``."""
        if isinstance(value, str):
            name, _, version = value.partition("==")
            return {"name": name, "version": version or None}
        return value

    @property
    def spec(self) -> str:
        """The scenario's spelling: ``vllm==0.24.0``, or the bare name without a version."""
        return f"{self.name}=={self.version}" if self.version else self.name


class Binding(_M):
    constraint: str
    marginal: str


class SimulatedFigures(_M):
    """What one simulation of a plan gave (placer.sim.engine.simulate)."""

    ttft_p90_s: float
    ttft_p99_s: float
    sla_attainment: float
    goodput_rps: float
    bcr_requests_per_usd: float
    requests: int


class Perturbed(SimulatedFigures):
    """The plan simulated with each chip's prefill and decode speed scaled (placer.perturb)."""

    speed_factors: dict[str, float] = Field(description="Chip name → factor on its compute and memory rates.")


class Verification(SimulatedFigures):
    """``placer optimize``'s default check: the plan simulated beside its promise (placer.sim.verify)."""

    seed: int = 0
    sla_met: bool = Field(description="Whether the simulated TTFT P90 (and TPOT) meet the SLA.")
    warnings: list[str] = Field(default_factory=list, description=(
        "Where the simulation and the plan differ by more than 10 % (P90 TTFT, attainment, goodput) or "
        "the simulation misses the SLA."))
    perturbation: float | None = Field(None, description="±X: each chip's speed off by this fraction (--perturb).")
    perturbed: list[Perturbed] = Field(default_factory=list, description=(
        "The plan simulated at each perturbed set of chip speeds (placer.perturb.speed_cases)."))


class Robust(_M):
    """``placer optimize --robust X``: planned against every chip X slower (placer.robust)."""

    slowdown: float = Field(description="X: the chips' compute and memory rates were planned at (1 − X).")
    ttft_p90_s_slow: float = Field(description="The plan's planned TTFT P90 with every chip X slower, s.")
    bcr_requests_per_usd_slow: float = Field(description="Its planned BCR with every chip X slower.")
    sla_met_slow: bool = Field(description="Whether its planned figures with every chip X slower meet the SLA.")
    nominal_bcr_requests_per_usd: float | None = Field(None, description=(
        "The BCR of the plan made for the nominal chips (absent when it could not be solved)."))
    bcr_cost: float | None = Field(None, description=(
        "Share of the nominal plan's BCR this plan gives up at nominal speed (0.1 = 10 % less)."))


class Plan(_M):
    schema_version: int = SCHEMA_VERSION
    scenario: str
    objective: str = "bcr"
    engine: EngineInfo = Field(default_factory=lambda: EngineInfo(name="roofline"), description=(
        "The serving engine the plan's numbers assume (the scenario's ``engine``): its name (roofline, sglang, "
        "vllm or trtllm) and the version pinned (``vllm==0.24.0``; null: each chip's newest shipped tables, the "
        "pools' notes name them; always null for the roofline); ``placer export`` "
        "warns when its format is another engine."))
    metrics: Metrics = Field(default_factory=Metrics)
    models: dict[Name, Metrics] | None = Field(None, description=(
        "Fleets: each model's own metrics (``metrics`` are then the fleet's); absent in single-model plans."))
    pools: list[PoolOut]
    routes: list[Route] = Field(default_factory=list)
    links: list[LinkUse] = Field(default_factory=list)
    handoff: Handoff = Field(default_factory=Handoff)
    solver: SolverInfo = Field(default_factory=SolverInfo)
    binding: list[Binding] = Field(default_factory=list)
    assignments: list[Assignment] = Field(default_factory=list, description="Per-pool split of each class.")
    notes: list[str] = Field(default_factory=list)
    verification: Verification | None = Field(None, description=(
        "The plan simulated beside its promise (`placer optimize` by default; absent with --no-verify)."))
    robust: Robust | None = Field(None, description=(
        "`placer optimize --robust X`: what planning for slower chips cost."))

    @model_validator(mode="after")
    def _shapes(self) -> Plan:
        _adopt_pool_shapes(self)
        return self

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent, exclude_none=True)


def parse_plan(data: object, source: str = "plan") -> Plan:
    if not isinstance(data, dict):
        raise InputError(f"{source}: plan must be a JSON object")
    try:
        plan = Plan.model_validate(data)
    except ValidationError as err:
        parts = []
        for e in err.errors()[:10]:
            loc = ".".join(str(p) for p in e["loc"])
            value = e.get("input")
            shown = "" if isinstance(value, (dict, list)) else f" (got {repr(value)[:80]})"
            parts.append(f"{loc}: {e['msg']}{shown}")
        raise InputError(f"{source}: invalid plan: {'; '.join(parts)}") from None
    if plan.schema_version != SCHEMA_VERSION:
        raise InputError(f"{source}: schema_version {plan.schema_version} is not supported (expected {SCHEMA_VERSION})")
    return plan


def load_plan(path: str | Path) -> Plan:
    """Read and validate a plan JSON file (placer.readers' rules: UTF-8, no duplicate keys, bounded nesting)."""
    path = Path(path)
    return parse_plan(load_data(path, "plan file", kind="json"), str(path))
